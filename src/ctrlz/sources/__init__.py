"""Sources of activity that ``ctrlz run`` records alongside snapshots.

Submodules are imported on demand (``from ctrlz.sources.trace import Tracer``) so that
importing ctrlz stays cheap.
"""
