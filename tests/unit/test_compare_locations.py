"""`irkit compare`'s location footnotes: one line per op, names at one file line together."""

from __future__ import annotations

import os

from irkit.commands.compare_cmd import location_text
from irkit.ir.core import Location

SITE = "/opt/py/lib/python3.11/site-packages/transformers/models/llama/modeling_llama.py"


def test_one_location_reads_as_before() -> None:
    assert location_text(Location.unknown()) == "unknown location"
    assert location_text(Location(file="gpt2_block.py", line=50, name="h.0.attn.out")) == \
        "h.0.attn.out at gpt2_block.py:50"
    assert location_text(Location(name="/attn/MatMul")) == "/attn/MatMul"
    assert location_text(Location(file="m.py", line=3, col=7)) == "m.py:3:7"


def test_fused_locations_share_their_file_line() -> None:
    loc = Location.fuse([Location(file=SITE, line=66, name="mul_3"), Location(file=SITE, line=66, name="rsqrt"),
                         Location(file=SITE, line=65, name="mean"), Location(file=SITE, line=66, name="add_3"),
                         Location(name="/attn/MatMul")])
    assert location_text(loc) == ("mul_3, rsqrt, add_3 at transformers/models/llama/modeling_llama.py:66; "
                                  "mean at transformers/models/llama/modeling_llama.py:65; /attn/MatMul")
    two = Location.fuse([Location(file="gpt2_block.py", line=50, name="h.0.attn.out"),
                         Location(file="gpt2_block.py", line=40, name="h.0.attn.scores")])
    assert location_text(two) == "h.0.attn.out at gpt2_block.py:50; h.0.attn.scores at gpt2_block.py:40"


def test_paths_under_the_working_folder_are_relative() -> None:
    here = os.path.join(os.getcwd(), "examples", "models", "gpt2.py")
    assert location_text(Location(file=here, line=96, name="addmm")) == \
        f"addmm at {os.path.join('examples', 'models', 'gpt2.py')}:96"
    elsewhere = os.path.join(os.path.dirname(os.getcwd()) or "/", "zz_not_below", "m.py")
    assert location_text(Location(file=elsewhere, line=1)) == f"{elsewhere}:1"
