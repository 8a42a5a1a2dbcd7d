"""Making a million IR objects fast (:mod:`mkernel.ir`): a faster ``__init__`` for its frozen
dataclasses (and a faster constructor still, :func:`quick_new`, for the hottest call sites), and
the garbage collector paused while they are made and used.

A frozen dataclass's generated ``__init__`` sets each field with ``object.__setattr__`` by name (it
must: its own ``__setattr__`` refuses). With slots, each field is a slot whose descriptor can store
the value directly, at about 60% of the cost, and a large build makes close to a million regions,
signals, waits, steps and tasks.
"""
from __future__ import annotations

import dataclasses
import gc
import inspect
from collections.abc import Callable
from contextlib import contextmanager


def quick_init(cls: type) -> type:
    """``cls`` (a frozen dataclass with slots) with an ``__init__`` that stores each field through
    its slot's descriptor: the same signature, defaults and result (a 2 x 8 GEMM+AR 32768^2 build:
    about 0.4 s less of its 2.7 s). Frozenness, equality, hashing and pickling are the
    dataclass's own, untouched."""
    if hasattr(cls, "__post_init__"):  # the generated __init__ below would skip it
        raise TypeError(f"{cls.__name__}: quick_init cannot keep a __post_init__")
    names = [f.name for f in dataclasses.fields(cls)]
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    if [p.name for p in params] != names:
        raise TypeError(f"{cls.__name__}: the __init__ parameters are not its fields")
    args = ", ".join(p.name if p.default is p.empty else f"{p.name}=_d_{p.name}" for p in params)
    source = (f"def make({', '.join('_s_' + n for n in names)}):\n    def __init__(self, {args}):\n"
              + "".join(f"        _s_{n}(self, {n})\n" for n in names) + "    return __init__\n")
    scope = {f"_d_{p.name}": p.default for p in params if p.default is not p.empty}
    exec(source, scope)  # (only the class's field names and defaults go in)
    init = scope["make"](*(cls.__dict__[n].__set__ for n in names))
    init.__qualname__, init.__module__ = f"{cls.__qualname__}.__init__", cls.__module__
    cls.__init__ = init
    return cls


@contextmanager
def paused_gc():
    """Pause Python's cyclic garbage collector (builders, validate and the simulator use it).

    Why: a schedule is up to millions of small frozen objects that all live until the run ends, and
    each full collection re-scans every one of them: half of a large build's time went there, and a
    third of a large run's. None of them is cyclic garbage, so nothing is lost by not looking; the
    collector's previous state is restored on exit (nested pauses keep it paused).

    On exit the objects made meanwhile move straight to the oldest generation (``freeze`` then
    ``unfreeze``: two list splices). Left young, they would all be scanned by the next young
    collection and again by the middle one on their way there (about 1 s of a 2 x 8 32768^2 run);
    in the oldest they wait for the next full collection, which frees any cycle among them (the
    simulator's run, the one such cycle, is dropped by :meth:`mkernel.sim.engine.Model.close`)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.freeze()
            gc.unfreeze()
            gc.enable()


def quick_new(cls: type) -> Callable:
    """A constructor of ``cls`` (a ``quick_init`` class) from all its fields, given positionally, at
    about a third of the cost of calling ``cls``: a function that makes a bare instance of a
    subclass of ``cls`` that adds no slots and lets its attributes be set (``object.__setattr__``
    and ``__delattr__``, so the interpreter stores each field straight into its slot), stores each
    field, and makes the instance a ``cls`` by assigning its ``__class__``. The bare instance comes
    from calling the subclass, whose ``__init__`` is ``object``'s (no arguments, nothing run): about
    280 instructions less than ``object.__new__(subclass)``, which copies its arguments into a new
    tuple less the class. What it makes is what
    ``cls(*fields)`` makes: of type ``cls``, equal, hashing alike, frozen. Why a subclass and a
    function: the assignment checks that the two layouts agree, and for a subclass that adds
    nothing it walks up to ``cls`` itself and is done, where two unrelated classes have their
    slot names compared (about 550 instructions an object); and a function is called without a
    class's ``__init__`` looked up and bound (about 350 more). For the builders' hottest
    constructors: a 2 x 8 GEMM+AR 32768^2 build makes 570k regions, signals, waits, steps and tasks.
    The subclass (``cls.__name__ + "Fields"``) is listed among ``cls.__subclasses__()``; nothing it
    makes is of it."""
    names, sub = _settable(cls)
    source = (f"def new({', '.join(names)}):\n    self = _settable()\n"
              + "".join(f"    self.{n} = {n}\n" for n in names) + "    self.__class__ = _cls\n    return self\n")
    return _made(source, "new", cls, sub, f"quick_new({cls.__qualname__})")


def quick_new_each(cls: type, field: str, size: int = 0) -> Callable:
    """A constructor of a tuple of ``cls`` instances, one for each value of ``field`` in an iterable
    given in its place (the other fields given positionally, shared): :func:`quick_new`'s way, with
    the loop in the made function. Why: a call of a Python function costs about as much again as
    making the instance, and the builders make tuples of regions alike but for their rank (a 2 x 8
    GEMM+AR 32768^2 build: 245k regions of its node reductions and broadcasts). With ``size``, for
    a sequence of exactly ``size`` values, the loop unrolled and the tuple made at once, without a
    list: about a tenth less for tuples of 7 and 8 (that build's)."""
    names, sub = _settable(cls)
    if field not in names:
        raise TypeError(f"{cls.__name__}: quick_new_each needs {field!r} among its fields")
    if size < 0:
        raise ValueError(f"quick_new_each: size {size} (the values' count to unroll for, or 0 for any count)")
    if size:
        values, made = [f"_v{i}" for i in range(size)], [f"_o{i}" for i in range(size)]
        if set(values + made) & set(names):
            raise TypeError(f"{cls.__name__}: quick_new_each cannot unroll a field named _v<i> or _o<i>")
        source = (f"def new_each({', '.join(names)}):\n    {', '.join(values)}, = {field}\n"
                  + "".join(f"    {o} = _settable()\n" + "".join(f"    {o}.{x} = {v if x == field else x}\n"
                                                                  for x in names) + f"    {o}.__class__ = _cls\n"
                            for o, v in zip(made, values))
                  + f"    return ({', '.join(made)},)\n")
        return _made(source, "new_each", cls, sub, f"quick_new_each({cls.__qualname__}, {field}, {size})")
    source = (f"def new_each({', '.join(names)}):\n    _out = []\n    for _v in {field}:\n"
              f"        self = _settable()\n"
              + "".join(f"        self.{n} = {'_v' if n == field else n}\n" for n in names)
              + "        self.__class__ = _cls\n        _out.append(self)\n    return tuple(_out)\n")
    return _made(source, "new_each", cls, sub, f"quick_new_each({cls.__qualname__}, {field})")


def settable(cls: type) -> type:
    """The subclass of ``cls`` (a frozen slotted dataclass whose slots are its fields, without a
    ``__new__``: what :func:`quick_new` takes) that :func:`quick_new` fills, for a loop that
    makes its instances inline: ``o = settable()``, each field stored (``o.field = value``: every
    one, else reading it fails), then ``o.__class__ = cls``, which is what ``cls(*fields)`` makes.
    Why: a call of a quick_new constructor costs about a quarter more than the instance made inline
    (callgrind, 100k regions), and a 2 x 8 GEMM+AR 32768^2 build's node sums, broadcasts and
    exchange sums make 100k regions, signals and waits and 49k tasks one by one. Store at most
    three fields a statement: ``o.a, o.b, o.c, o.d = ...`` builds and frees a tuple."""
    return _settable(cls)[1]


_SETTABLE: dict[type, type] = {}  # cls -> its settable subclass (one each, however many constructors)


def _settable(cls: type) -> tuple[list[str], type]:
    """``cls``'s field names, checked, and the settable subclass the made constructors fill."""
    names = [f.name for f in dataclasses.fields(cls)]
    if tuple(names) != cls.__dict__.get("__slots__"):  # its own: a subclass's layout would differ
        raise TypeError(f"{cls.__name__}: quick_new needs its slots to be its fields, in order")
    if {"self", "_settable", "_cls", "_v", "_out"} & set(names):  # (the made functions' own names)
        raise TypeError(f"{cls.__name__}: quick_new cannot make a field named self, _settable, _cls, _v or _out")
    if cls.__new__ is not object.__new__:  # (the bare instance is object's: calling the subclass)
        raise TypeError(f"{cls.__name__}: quick_new cannot keep a __new__")
    sub = _SETTABLE.get(cls)
    if sub is None:
        sub = _SETTABLE[cls] = type(f"{cls.__name__}Fields", (cls,), {
            "__slots__": (), "__setattr__": object.__setattr__, "__delattr__": object.__delattr__,
            "__init__": object.__init__, "__module__": cls.__module__})  # (calling it makes a bare instance)
    return names, sub


def _made(source: str, name: str, cls: type, sub: type, qualname: str) -> Callable:
    scope = {"_settable": sub, "_cls": cls}
    exec(source, scope)  # (only the class's field names go in)
    made = scope[name]
    made.__qualname__, made.__module__ = qualname, cls.__module__
    return made
