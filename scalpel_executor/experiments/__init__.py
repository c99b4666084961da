"""What measures the executor: the demo, the benchmark against Parsl's executors, calibration.

Nothing in the runtime imports this package.
"""
