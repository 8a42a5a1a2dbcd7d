"""mkernel.slots.quick_init: the IR's faster constructor must build what the dataclass's own does, and
refuse a class whose own __init__ does more than store fields."""
from __future__ import annotations

import dataclasses

import pytest

from mkernel.ir import Region
from mkernel.slots import quick_init


@dataclasses.dataclass(frozen=True, slots=True)
class _Plain:
    a: int
    b: tuple = ()
    c: str = "x"


def test_the_quick_constructor_builds_what_the_dataclass_builds():
    Quick = quick_init(dataclasses.make_dataclass("Quick", [("a", int), ("b", tuple, dataclasses.field(default=())),
                                                            ("c", str, dataclasses.field(default="x"))],
                                                  frozen=True, slots=True))
    for args, kw in (((1,), {}), ((1, (2, 3)), {}), ((1,), {"c": "y"}), ((), {"a": 4, "b": (5,), "c": "z"})):
        q, p = Quick(*args, **kw), _Plain(*args, **kw)
        assert (q.a, q.b, q.c) == (p.a, p.b, p.c)
    with pytest.raises(dataclasses.FrozenInstanceError):
        Quick(1).a = 2
    with pytest.raises(TypeError):
        Quick()  # a required field is still required
    # the IR's classes carry it (a dataclass's own __init__ stores through object.__setattr__, not slot setters)
    assert {f"_s_{f.name}" for f in dataclasses.fields(Region)} == set(Region.__init__.__code__.co_freevars)


def test_a_class_with_post_init_is_refused():
    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        a: int

        def __post_init__(self):
            if self.a < 0:
                raise ValueError("negative")

    with pytest.raises(TypeError, match="__post_init__"):
        quick_init(Checked)
