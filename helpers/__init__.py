"""Support package for the attention-rank book.

Layers (imports only flow downwards):
  top:    book, __main__, experiments (the sweep runner; chNN_<slug> per chapter notebook), plotting, record, ledger
  middle: train, data, models, capture, minilm, cache, executors
  ground: rank, saturation, results, english, threads, hardmax_sampling, attention, theory, geometry,
          counterexamples, parameters, errors, seeding, paths
"""

__version__ = "0.1.0"
