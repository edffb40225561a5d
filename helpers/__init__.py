"""Support package for the attention-rank book.

Layers (imports only flow downwards):
  top:    book, __main__, experiments, plotting, record
  middle: train, data, models, capture, cache
  ground: rank, attention, theory, config, seeding, paths
"""

__version__ = "0.1.0"
