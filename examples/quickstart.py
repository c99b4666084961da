"""Ten lines a Parsl user copies: the same apps, a ScalpelExecutor underneath."""

import parsl
from parsl import python_app

from scalpel_executor import scalpel_config


@python_app
def stencil(n, parsl_resource_specification={}):
    import numpy as np

    grid = np.random.default_rng(n).random((n, n))
    for _ in range(20):
        grid[1:-1, 1:-1] = 0.25 * (grid[:-2, 1:-1] + grid[2:, 1:-1] + grid[1:-1, :-2] + grid[1:-1, 2:])
    return float(grid.mean())


if __name__ == "__main__":
    with parsl.load(scalpel_config()):
        sizes = [1500, 200, 1200, 300, 900, 400]
        # Optional hints: footprint (bytes or "24MiB") and runtime (s) help the grouping.
        futures = [stencil(n, parsl_resource_specification={"footprint": 8 * n * n}) for n in sizes]
        print([round(f.result(), 4) for f in futures])
