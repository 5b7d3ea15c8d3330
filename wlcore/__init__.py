"""The core both sides build on: the log format (batches, manifests, snapshots, levels, epochs),
storage, names, the collapse rules, Delta log reading, settings and the master's state file.

Capture (:mod:`wlc`) and replay (:mod:`wlr`) import from here; nothing here imports either.
"""
