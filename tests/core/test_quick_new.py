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
