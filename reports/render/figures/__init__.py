"""The report's figures, matplotlib without pyplot or a GUI: the look (:mod:`.style`), the axes (:mod:`.axes`),
how a figure is drawn to SVG or into a PDF slot (:mod:`.spec`), and one module per figure family. Every drawing
function fills whatever figure or subfigure it is given and tolerates missing pieces of ``fit.json``."""
