"""The ``scalpel`` command run in this process: exit status, standard output, standard error."""

import pytest

from scalpel_executor.cli import main


@pytest.fixture
def scalpel(capsys):
    def run(*argv):
        code = main(list(argv))
        out = capsys.readouterr()
        return code, out.out, out.err

    return run
