"""The report's sections, one module per family; each section is a function of the
:class:`~ladder.reports.render.builder.Builder` that returns a :class:`~ladder.reports.render.blocks.Section`."""
