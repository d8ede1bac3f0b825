"""ladder: rehearse a big pretraining run on a scaling ladder of small ones.

Data flows one way: ``studies`` (what to train) -> ``plan`` (runs on disk) -> ``submit`` (jobs) ->
``model.train`` (on the node) -> ``collect`` (results table) -> ``reports`` (fits, forecast, report).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("ladder")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"
