"""Accuracy and performance harness: a fleet simulator with ground truth, and the benchmarks
that drive the real pipeline (connectors → lake → engine) over what it writes.

* :func:`benchmarks.simulate.simulate` writes a fleet's raw inputs in real formats plus a
  ground-truth table; :func:`benchmarks.simulate.ingest` lands them with the connectors.
* :func:`benchmarks.accuracy.bench_accuracy` scores verdicts against the truth (and the real
  incidents of the shared corpus).
* :func:`benchmarks.perf.bench_perf` times every stage and measures memory.
"""
