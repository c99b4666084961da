"""Batches and machines the evaluator's tests draw from (tests/core/test_orders.py and the oracle's,
tests/experiments/test_order_search.py): small batches of simulated tasks on small topologies."""

from hypothesis import strategies as st

from scalpel_executor.core.contention import ContentionModel
from scalpel_executor.core.orders import FcfsEvaluator
from scalpel_executor.core.simulate import SimTask

MiB = 2**20
TOPOLOGIES = [[[0, 1]], [[0, 1], [2, 3]], [[0, 1, 2, 3], [4, 5, 6, 7]], [[0, 1, 2], [3]]]

sim_tasks = st.lists(
    st.tuples(st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0, 5.0]), st.sampled_from([0.25, 2, 6, 12, 20])),
    min_size=1, max_size=14,
).map(lambda pairs: [SimTask(f"t{i}", r, f * MiB) for i, (r, f) in enumerate(pairs)])

#: The same batches, each task with true interference residuals (sensitivity, pressure) or none.
sim_tasks_with_terms = st.lists(
    st.tuples(st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0, 5.0]), st.sampled_from([0.25, 2, 6, 12, 20]),
              st.sampled_from([None, (0.0, 0.0), (0.0, 0.3), (0.25, 0.0), (0.2, -0.1), (-0.3, 0.1)])),
    min_size=1, max_size=14,
).map(lambda triples: [SimTask(f"t{i}", r, f * MiB, interference=terms) for i, (r, f, terms) in enumerate(triples)])


def evaluator(tasks, domains, llc=12 * MiB, model=None):
    return FcfsEvaluator.of(tasks, [len(d) for d in domains], llc, model or ContentionModel())
