"""dataflow/main_guard.py: a line is guarded only inside an
``if __name__ == "__main__":`` block (either side of the comparison); the
check leaves alone a process whose main module is no script file."""
from __future__ import annotations

import textwrap

import pytest

from lancetnic_flow.dataflow.main_guard import guarded, refuse_unguarded_script

SCRIPT = textwrap.dedent('''\
    import lancetnic_flow
    train = 1

    def main():
        run()

    if __name__ == "__main__":
        main()
        more()
    if "__main__" == __name__:
        again()
    if __name__ != "__main__":
        never_guarded()
''')


@pytest.mark.parametrize("line,inside", [(1, False), (2, False), (5, False), (8, True), (9, True), (11, True),
                                         (13, False)])
def test_only_lines_under_the_main_test_are_guarded(line, inside):
    assert guarded(SCRIPT, line) is inside


def test_a_package_run_with_python_m_is_not_refused():
    refuse_unguarded_script()   # pytest's __main__ is a module run with -m or an entry point: nothing re-imported
