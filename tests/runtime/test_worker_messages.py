"""The worker protocol: every message survives its encoding, and nothing else is taken for one."""

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scalpel_executor.runtime.wire.worker_messages import Ready, WorkerResult, Run, Stop, Warm, decode, encode

stats = st.dictionaries(st.text(max_size=8), st.one_of(st.none(), st.floats(allow_nan=False), st.text(max_size=8)), max_size=4)
messages = st.one_of(
    st.builds(Ready, st.integers(1, 2**22)), st.just(Warm()), st.just(Stop()),
    st.builds(Run, st.integers(0, 2**40), st.binary(max_size=64)),
    st.builds(WorkerResult, st.integers(0, 2**40), st.booleans(), st.binary(max_size=64), stats),
)


@given(messages)
def test_every_message_decodes_to_itself(message):
    decoded = decode(encode(message))
    assert type(decoded) is type(message) and decoded == message


@pytest.mark.parametrize("envelope", [("hello",), ("task", 1), ("result", 1, True), (), 42])
def test_anything_else_is_refused_naming_it(envelope):
    with pytest.raises(ValueError, match="not a worker protocol message"):
        decode(pickle.dumps(envelope))
