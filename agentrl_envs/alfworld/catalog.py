"""The household catalog: rooms, receptacles, objects, what fits where, and the six task types.

ALFWorld's own tables are the source of truth for what an object *is*: which receptacle types
can hold which object types (``VAL_RECEPTACLE_OBJECTS``), which objects can be heated, cooled,
cleaned, toggled or sliced (``VAL_ACTION_OBJECTS``), which receptacles open
(``OPENABLE_CLASS_LIST``), and the goal sentences (``goal_library.gdict``). They ship inside the
``alfworld`` wheel as plain Python files; we read them by path so that nothing in the
``alfworld`` package is imported (importing it creates a cache folder as a side effect).

What ALFWorld does not ship as a table (it lives in its AI2-THOR floor plans) is which
receptacles and objects a kitchen, bathroom, bedroom or living room contains, and how many
of each; :data:`ROOMS` below is our own summary of those scenes.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from agentrl.errors import UserError

#: The six task types, in the order the paper lists them. ``info["task_type"]`` is one of these.
TASK_TYPES: tuple[str, ...] = (
    "pick_and_place",
    "pick_clean_then_place",
    "pick_heat_then_place",
    "pick_cool_then_place",
    "look_at_obj_in_light",
    "pick_two_obj_and_place",
)

#: One-word names for table columns (docs/benchmarks.md's tables), in alphabetical order of the
#: task types, the order the report and the benchmark tables list them.
SHORT_NAMES: dict[str, str] = {
    "look_at_obj_in_light": "look",
    "pick_and_place": "place",
    "pick_clean_then_place": "clean",
    "pick_cool_then_place": "cool",
    "pick_heat_then_place": "heat",
    "pick_two_obj_and_place": "two",
}

#: ALFWorld's own task-type names (``traj_data.json`` and ``goal_library``) -> ours.
OFFICIAL_TASK_TYPES: dict[str, str] = {
    "pick_and_place_simple": "pick_and_place",
    "pick_clean_then_place_in_recep": "pick_clean_then_place",
    "pick_heat_then_place_in_recep": "pick_heat_then_place",
    "pick_cool_then_place_in_recep": "pick_cool_then_place",
    "look_at_obj_in_light": "look_at_obj_in_light",
    "pick_two_obj_and_place": "pick_two_obj_and_place",
}
GOAL_LIBRARY_KEY: dict[str, str] = {ours: theirs for theirs, ours in OFFICIAL_TASK_TYPES.items()}

#: The appliance a task type needs besides the target receptacle (the domain's actions name
#: these receptacle types: CleanObject needs a SinkBasin, HeatObject a Microwave, CoolObject a
#: Fridge).
APPLIANCE: dict[str, str] = {
    "pick_clean_then_place": "SinkBasin",
    "pick_heat_then_place": "Microwave",
    "pick_cool_then_place": "Fridge",
}

#: The object property a task type needs (a key of ALFWorld's ``VAL_ACTION_OBJECTS``).
PROPERTY_NEEDED: dict[str, str] = {
    "pick_clean_then_place": "Cleanable",
    "pick_heat_then_place": "Heatable",
    "pick_cool_then_place": "Coolable",
}

#: Rooms a task type is played in (as in ALFRED: heating and cooling happen in kitchens,
#: cleaning in kitchens and bathrooms, looking under a lamp in bedrooms and living rooms).
TASK_ROOMS: dict[str, tuple[str, ...]] = {
    "pick_and_place": ("kitchen", "bathroom", "bedroom", "livingroom"),
    "pick_clean_then_place": ("kitchen", "bathroom"),
    "pick_heat_then_place": ("kitchen",),
    "pick_cool_then_place": ("kitchen",),
    "look_at_obj_in_light": ("bedroom", "livingroom"),
    "pick_two_obj_and_place": ("kitchen", "bathroom", "bedroom", "livingroom"),
}

#: Lamps are not receptacle contents in ALFWorld's tables, but the domain's ToggleObject needs
#: the lamp to be "in" a receptacle the agent stands at, so a lamp stands on one of these.
LAMP_STANDS: dict[str, tuple[str, ...]] = {
    "DeskLamp": ("Desk", "SideTable", "Dresser"),
    "FloorLamp": ("SideTable", "Dresser", "ArmChair"),
}

#: Receptacle types that hold an object with an id of the form ``Sink_bar_1_bar_SinkBasin``:
#: ALFWorld's name demangler appends "basin" to the first part only when the id contains it.
BASIN_PREFIX: dict[str, str] = {"SinkBasin": "Sink", "BathtubBasin": "Bathtub"}


@dataclass(frozen=True)
class Room:
    """What a room type contains: receptacle types with (min, max) counts, and object types.

    ``receptacles`` lists every receptacle type the room may have; a type whose minimum is 1
    is always present (a kitchen always has a fridge). ``objects`` are the portable things
    that can lie around, ``lamps`` the toggleable lamps (look-in-light tasks).
    """

    name: str
    receptacles: dict[str, tuple[int, int]]
    objects: tuple[str, ...]
    lamps: tuple[str, ...] = ()


ROOMS: dict[str, Room] = {
    "kitchen": Room(
        "kitchen",
        {
            "Cabinet": (1, 8), "CounterTop": (1, 3), "Drawer": (0, 6), "Fridge": (1, 1),
            "Microwave": (1, 1), "SinkBasin": (1, 1), "StoveBurner": (0, 4),
            "CoffeeMachine": (0, 1), "Toaster": (0, 1), "GarbageCan": (1, 1),
            "DiningTable": (0, 1), "Shelf": (0, 3),
        },
        (
            "Apple", "Bread", "Egg", "Lettuce", "Potato", "Tomato", "Mug", "Cup", "Bowl",
            "Plate", "Pan", "Pot", "Kettle", "Fork", "Knife", "ButterKnife", "Spoon",
            "Spatula", "Ladle", "DishSponge", "SaltShaker", "PepperShaker", "SoapBottle",
            "WineBottle", "Glassbottle", "PaperTowel",
        ),
    ),
    "bathroom": Room(
        "bathroom",
        {
            "SinkBasin": (1, 2), "BathtubBasin": (0, 1), "Toilet": (1, 1),
            "ToiletPaperHanger": (1, 1), "TowelHolder": (0, 1), "HandTowelHolder": (0, 2),
            "CounterTop": (1, 1), "Cabinet": (0, 4), "Drawer": (0, 4), "GarbageCan": (1, 1),
            "Shelf": (0, 2), "Cart": (0, 1),
        },
        (
            "SoapBar", "SoapBottle", "Cloth", "HandTowel", "Towel", "ToiletPaper",
            "SprayBottle", "DishSponge", "TissueBox", "Candle", "Plunger", "PaperTowel",
        ),
    ),
    "bedroom": Room(
        "bedroom",
        {
            "Bed": (1, 1), "Desk": (0, 1), "Drawer": (1, 6), "Dresser": (0, 1),
            "Shelf": (0, 3), "SideTable": (0, 2), "GarbageCan": (1, 1),
            "LaundryHamper": (0, 1), "Safe": (0, 1), "ArmChair": (0, 1),
        },
        (
            "AlarmClock", "Book", "CD", "CellPhone", "CreditCard", "KeyChain", "Laptop",
            "Pen", "Pencil", "Pillow", "BaseballBat", "BasketBall", "TennisRacket", "Mug",
            "Bowl", "Cloth", "Watch", "Statue", "Vase", "TissueBox",
        ),
        ("DeskLamp",),
    ),
    "livingroom": Room(
        "livingroom",
        {
            "Sofa": (1, 1), "ArmChair": (0, 2), "CoffeeTable": (1, 1), "SideTable": (0, 2),
            "DiningTable": (0, 1), "TVStand": (0, 1), "Drawer": (0, 4), "Cabinet": (0, 4),
            "Shelf": (0, 4), "Dresser": (0, 1), "Ottoman": (0, 1), "GarbageCan": (1, 1),
            "Safe": (0, 1),
        },
        (
            "Book", "Box", "CellPhone", "CreditCard", "KeyChain", "Laptop", "Newspaper",
            "Pillow", "RemoteControl", "Statue", "Vase", "Watch", "WateringCan", "TissueBox",
            "Candle", "Plate", "Bowl",
        ),
        ("FloorLamp", "DeskLamp"),
    ),
}

#: Movable receptacles: ALFWorld marks them ``isReceptacleObject`` (examine shows "In it...").
RECEPTACLE_OBJECTS = frozenset({"Bowl", "Box", "Cup", "Mug", "Plate", "Pan", "Pot"})


def alfworld_dir() -> Path:
    """The installed ``alfworld`` package folder, found without importing the package."""
    spec = importlib.util.find_spec("alfworld")
    if spec is None or not spec.submodule_search_locations:
        raise UserError(
            "The ALFWorld env needs the alfworld extra: pip install 'agentrl[alfworld]'."
        )
    return Path(list(spec.submodule_search_locations)[0])


def _load_by_path(relative: str, name: str) -> ModuleType:
    path = alfworld_dir() / relative
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserError(f"Cannot read {path}; reinstall the alfworld extra.")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.cache
def alfworld_constants() -> ModuleType:
    """ALFWorld's ``gen/constants.py`` (object tables), loaded by path."""
    return _load_by_path("gen/constants.py", "agentrl_envs.alfworld._alfred_constants")


@functools.cache
def goal_templates() -> dict[str, tuple[str, ...]]:
    """Goal sentence templates per task type (ours), from ALFWorld's ``goal_library``."""
    library = _load_by_path("gen/goal_library.py", "agentrl_envs.alfworld._alfred_goals").gdict
    return {ours: tuple(library[theirs]["templates"]) for ours, theirs in GOAL_LIBRARY_KEY.items()}


@functools.cache
def domain_text() -> str:
    """The PDDL domain (``alfworld/data/alfred.pddl``)."""
    return (alfworld_dir() / "data" / "alfred.pddl").read_text()


@functools.cache
def grammar_text() -> str:
    """The text grammar (``alfworld/data/alfred.twl2``), task sentence still a placeholder."""
    return (alfworld_dir() / "data" / "alfred.twl2").read_text()


@functools.cache
def can_contain() -> dict[str, frozenset[str]]:
    """Receptacle type -> object types it can hold (ALFWorld's table, plus our lamp stands)."""
    table = {r: frozenset(objs) for r, objs in alfworld_constants().VAL_RECEPTACLE_OBJECTS.items()}
    return table


@functools.cache
def object_properties() -> dict[str, frozenset[str]]:
    """Property name (Heatable, Coolable, Cleanable, Toggleable, Sliceable) -> object types."""
    return {k: frozenset(v) for k, v in alfworld_constants().VAL_ACTION_OBJECTS.items()}


@functools.cache
def openable() -> frozenset[str]:
    """Receptacle types that open and close (fridge, cabinet, drawer, microwave, safe, box)."""
    return frozenset(alfworld_constants().OPENABLE_CLASS_LIST)


def holders(obj: str, receptacle_types: tuple[str, ...] | list[str] | set[str]) -> list[str]:
    """The receptacle types among ``receptacle_types`` that can hold ``obj`` (sorted)."""
    table = can_contain()
    return sorted(r for r in receptacle_types if obj in table.get(r, ()))
