"""Functions from the user's own modules: a module only the driver can import (a script's
helper, a notebook's package) travels to the executors by value; where it cannot, the run
fails before any task with ``[FUNCTION_NOT_SHIPPABLE]``.

The modules are written to a temporary directory put on the driver's ``sys.path`` only:
Spark's Python workers are other processes, which do not see it.
"""

from __future__ import annotations

import importlib
import shutil
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.connector import ProcessError, foreach_batch, process
from flinkstate.connector.process.shipping import ship

SCHEMA = "word string, letters bigint, count bigint, longest string"

HELPER = """
from flinkstate.state import (
    KeyedProcessFunction, ReduceFunction, ReducingStateDescriptor, Types, ValueStateDescriptor,
)
from {dep} import weight, Longest


class Add(ReduceFunction):
    def reduce(self, a, b):
        return a + b


LETTERS = ReducingStateDescriptor("letters", Add(), Types.LONG())


class Tally(KeyedProcessFunction):
    \"\"\"Per word: its letters so far (a reducing state), how often, the longest spelling.\"\"\"

    def open(self, runtime_context):
        self.letters = runtime_context.get_reducing_state(LETTERS)
        self.count = runtime_context.get_state(ValueStateDescriptor("count", Types.LONG()))
        self.longest = runtime_context.get_state(ValueStateDescriptor("longest", Types.STRING()))

    def process_element(self, value, ctx):
        self.letters.add(weight(value.spelling))
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        best = Longest.pick(self.longest.value(), value.spelling)
        self.longest.update(best)
        yield value.word, self.letters.get(), n, best
"""

DEP = """
def weight(text):
    return len(text)


class Longest:
    @staticmethod
    def pick(old, new):
        return new if old is None or len(new) > len(old) else old
"""


def tally_model(rows: list[tuple[str, str]]) -> list[tuple[str, int, int, str]]:
    """What Tally emits, in plain Python (rows of one word in input order)."""
    letters: dict[str, int] = {}
    count: dict[str, int] = {}
    longest: dict[str, str] = {}
    out = []
    for word, spelling in rows:
        letters[word] = letters.get(word, 0) + len(spelling)
        count[word] = count.get(word, 0) + 1
        if word not in longest or len(spelling) > len(longest[word]):
            longest[word] = spelling
        out.append((word, letters[word], count[word], longest[word]))
    return sorted(out)


@pytest.fixture
def own_modules(tmp_path: Path) -> Iterator[Callable[[dict[str, str]], list[Any]]]:
    """Writes modules (name -> source) to a directory on the driver's sys.path only and
    imports them; forgets them (and their by-value registration) afterwards."""
    from pyspark import cloudpickle

    directory = tmp_path / "driver_only"
    directory.mkdir()
    sys.path.insert(0, str(directory))

    def make(sources: dict[str, str]) -> list[Any]:
        for name, source in sources.items():
            (directory / f"{name}.py").write_text(textwrap.dedent(source))
        importlib.invalidate_caches()
        return [importlib.import_module(name) for name in sources]

    yield make
    sys.path.remove(str(directory))
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(directory)):
            del sys.modules[name]
            if name in cloudpickle.list_registry_pickle_by_value():
                cloudpickle.unregister_pickle_by_value(module)


def _names() -> tuple[str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"my_helper_{tag}", f"my_dep_{tag}"


BATCHES = [
    [("a", "ab"), ("b", "bbbb"), ("a", "abc")],
    [("a", "a"), ("c", "cc"), ("b", "bbbbbb")],
]


def _frame(spark: Any, rows: list[tuple[str, str]]) -> Any:
    return spark.createDataFrame(rows, "word string, spelling string")


def test_a_function_from_a_driver_only_module_runs_in_process_and_foreach_batch(
    spark: Any, tmp_path: Path, own_modules: Callable[[dict[str, str]], list[Any]]
) -> None:
    rows = [r for batch in BATCHES for r in batch]
    helper_name, dep_name = _names()
    _, helper = own_modules({dep_name: DEP, helper_name: HELPER.format(dep=dep_name)})
    out = process(
        _frame(spark, rows), "word", helper.Tally(), SCHEMA, str(tmp_path / "p"), "t", parallelism=2
    )
    assert sorted(map(tuple, out.collect())) == tally_model(rows)
    # the helper and what it imports went by value: the workers cannot import them
    assert ship(spark, helper.Tally()) == tuple(sorted((helper_name, dep_name)))

    streamed_name, streamed_dep = _names()  # modules of their own: nothing shipped yet
    _, streamed = own_modules({streamed_dep: DEP, streamed_name: HELPER.format(dep=streamed_dep)})
    delivered: list[tuple[Any, ...]] = []
    run = foreach_batch(
        "word", streamed.Tally(), SCHEMA, str(tmp_path / "s"), "t",
        sink=lambda df, _: delivered.extend(map(tuple, df.collect())), parallelism=2,
    )  # fmt: skip
    for batch_id, batch in enumerate(BATCHES):
        run(_frame(spark, batch), batch_id)
    assert sorted(delivered) == tally_model(rows)


UNPICKLABLE = """
import threading

from flinkstate.state import KeyedProcessFunction

GUARD = threading.Lock()


class Guarded(KeyedProcessFunction):
    def process_element(self, value, ctx):
        with GUARD:
            yield value.word, 0, 0, ""
"""


def test_a_driver_only_module_that_does_not_pickle_fails_before_any_task(
    spark: Any, tmp_path: Path, own_modules: Callable[[dict[str, str]], list[Any]]
) -> None:
    name = f"my_guarded_{uuid.uuid4().hex[:8]}"
    (module,) = own_modules({name: UNPICKLABLE})
    root = tmp_path / "p"
    with pytest.raises(ProcessError, match=r"\[FUNCTION_NOT_SHIPPABLE\] function Guarded") as info:
        process(_frame(spark, BATCHES[0]), "word", module.Guarded(), SCHEMA, str(root), "g")
    message = str(info.value)
    assert name in message and "lock" in message and "addPyFile" in message
    assert CheckpointStorage(str(root)).latest_id() is None and not root.exists()


def test_a_compiled_module_the_executors_lack_fails_before_any_task(
    spark: Any, tmp_path: Path, own_modules: Callable[[dict[str, str]], list[Any]]
) -> None:
    """A helper using compiled code only the driver has (here: a copy of the standard
    library's ``_bisect`` in a package of the user's) cannot travel by value."""
    import _bisect

    if not getattr(_bisect, "__file__", None):
        pytest.skip("_bisect is built into this interpreter")
    helper_name, _ = _names()
    package = f"{helper_name}_ext"
    compiled = Path(_bisect.__file__)
    source = f"""
        from flinkstate.state import KeyedProcessFunction
        from {package}.{compiled.name.split(".")[0]} import bisect_left


        class Ranked(KeyedProcessFunction):
            def process_element(self, value, ctx):
                yield value.word, bisect_left([1, 5], len(value.spelling)), 0, ""
    """
    package_dir = tmp_path / "driver_only" / package
    package_dir.mkdir(parents=True)
    (package_dir / "__init__.py").write_text("")
    shutil.copy(compiled, package_dir / compiled.name)
    (helper,) = own_modules({helper_name: source})
    root = tmp_path / "p"
    with pytest.raises(ProcessError, match=r"\[FUNCTION_NOT_SHIPPABLE\]") as info:
        process(_frame(spark, BATCHES[0]), "word", helper.Ranked(), SCHEMA, str(root), "r")
    assert f"{package}._bisect" in str(info.value) and "compiled" in str(info.value)
    assert not root.exists()


def test_a_module_the_executors_import_stays_by_reference(
    spark: Any, tmp_path: Path, own_modules: Callable[[dict[str, str]], list[Any]]
) -> None:
    """Shipped with addPyFile, the executors import the helper themselves: nothing travels by
    value (a copy of its classes would not be the class the executors' own imports see)."""
    from pyspark import cloudpickle

    helper_name, dep_name = _names()
    _, helper = own_modules({dep_name: DEP, helper_name: HELPER.format(dep=dep_name)})
    for name in (dep_name, helper_name):
        spark.sparkContext.addPyFile(str(tmp_path / "driver_only" / f"{name}.py"))
    assert ship(spark, helper.Tally()) == ()
    assert not {helper_name, dep_name} & set(cloudpickle.list_registry_pickle_by_value())
    rows = BATCHES[0]
    out = process(
        _frame(spark, rows), "word", helper.Tally(), SCHEMA, str(tmp_path / "p"), "t", parallelism=2
    )
    assert sorted(map(tuple, out.collect())) == tally_model(rows)


def test_installed_code_is_not_asked_about(own_modules: Callable[[dict[str, str]], list[Any]]) -> None:
    from flinkstate.connector.process.shipping import _installed

    name, _ = _names()
    own_modules({name: DEP})
    assert all(
        _installed(n) for n in ("json", "builtins", "rich.progress", "pyarrow.compute", "flinkstate.state")
    )
    assert not _installed(name)
