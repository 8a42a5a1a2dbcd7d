"""slots.quick_new: the fast constructor of the builders' hot paths makes what the class makes."""
from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest

from mkernel.ir import Op, Region, Role, Signal, Step, Task, Wait, new_region, new_step, new_task
from mkernel.slots import quick_new


def test_it_makes_the_object_the_class_makes():
    r = Region("P", 3, 0, 128, 256, 512)
    st = Step(((0, 0, 8),), ((0, 8),), (8,), 0, (3, 8), 0, (), 1)
    fields = (5, 3, Role.INTRA, Op.REDUCE, (r, r), (r,), False, (Wait(Signal(3, "x", 1), 2),), (Signal(2, "y"),),
              0, -1, "tile {}", (), (), 4, st)
    for made, want in ((new_region(*dataclasses.astuple(r)), r), (new_step(*(getattr(st, f.name) for f in
                       dataclasses.fields(Step))), st), (new_task(*fields), Task(*fields))):
        assert type(made) is type(want) and made == want and hash(made) == hash(want) and repr(made) == repr(want)
        assert pickle.loads(pickle.dumps(made)) == want and copy.copy(made) == want
        for obj in (made, want):  # frozen as the class's own
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(obj, dataclasses.fields(obj)[1].name, 1)


def test_it_refuses_a_class_whose_slots_are_not_its_fields():
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    with pytest.raises(TypeError):
        quick_new(NoSlots)

    class Inherits(Region):  # the parent's slots, not its own: its layout differs, so refused here
        pass

    with pytest.raises(TypeError):
        quick_new(Inherits)


def test_it_refuses_a_field_named_as_one_of_its_own_names():
    """The made function's own names (``self``, the globals it calls) cannot be fields: a field named
    ``self`` would be stored on nothing (before, the generated ``__init__`` was a syntax error)."""
    @dataclasses.dataclass(frozen=True, slots=True)
    class Odd:
        self: int
        b: int

    with pytest.raises(TypeError, match="self"):
        quick_new(Odd)


def test_each_makes_one_object_per_value_as_the_class_does():
    """quick_new_each: a tuple of what the class makes, the named field taking each value in turn."""
    from mkernel.slots import quick_new_each

    made = quick_new_each(Region, "rank")("P", [3, 0, 7], 0, 128, 256, 512)
    want = tuple(Region("P", r, 0, 128, 256, 512) for r in (3, 0, 7))
    assert made == want and all(type(r) is Region for r in made) and hash(made) == hash(want)
    assert quick_new_each(Region, "rank")("P", (), 0, 1, 0, 1) == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        made[0].rank = 1
    with pytest.raises(TypeError, match="among its fields"):
        quick_new_each(Region, "ranks")


def test_it_refuses_a_class_with_its_own_new():
    """The bare instance comes from calling the settable subclass, which runs the class's __new__."""
    @dataclasses.dataclass(frozen=True, slots=True)
    class Odd:
        a: int

        def __new__(cls, *args):
            return super().__new__(cls)

    with pytest.raises(TypeError, match="__new__"):
        quick_new(Odd)


def test_each_unrolled_for_n_values_makes_what_the_loop_makes():
    """quick_new_each with ``size``: the loop unrolled for exactly that many values makes the loop's
    tuple, and refuses any other count (it unpacks them)."""
    from mkernel.slots import quick_new_each

    loop = quick_new_each(Region, "rank")
    for n in range(1, 10):
        ranks = [(7 * i + 3) % 11 for i in range(n)]
        made = quick_new_each(Region, "rank", n)("OUT", ranks, 128, 256, 0, 512)
        want = loop("OUT", ranks, 128, 256, 0, 512)
        assert made == want == tuple(Region("OUT", r, 128, 256, 0, 512) for r in ranks)
        assert type(made) is tuple and all(type(r) is Region for r in made) and hash(made) == hash(want)
        with pytest.raises(ValueError):
            quick_new_each(Region, "rank", n)("OUT", ranks + [0], 128, 256, 0, 512)
    with pytest.raises(dataclasses.FrozenInstanceError):
        made[0].rank = 1


def test_settable_filled_inline_makes_what_the_class_makes():
    """slots.settable: an instance of it, every field stored, then its class set to the class's, is
    what the class makes (the builders' inline regions, signals, waits, tasks and tiles)."""
    from mkernel.builders._tiling import Tile
    from mkernel.slots import settable

    r = Region("P", 3, 0, 128, 256, 512)
    wanted = [r, Signal(3, "final", 7), Wait(Signal(1, "contrib", 2), 8), Tile(5, 0, 16, 32, 64, 16, 32),
              Task(5, 3, Role.INTRA, Op.COPY, (r,), (r,), False, (), (), 0, -1, "tile {}", (), (), 4, None)]
    for want in wanted:
        cls = type(want)
        made = settable(cls)()
        for f in dataclasses.fields(cls):
            setattr(made, f.name, getattr(want, f.name))
        made.__class__ = cls
        assert type(made) is cls and made == want and hash(made) == hash(want) and repr(made) == repr(want)
        assert pickle.loads(pickle.dumps(made)) == want
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(made, dataclasses.fields(cls)[0].name, 1)
    assert settable(Region) is settable(Region)  # (one subclass a class, however many callers)
