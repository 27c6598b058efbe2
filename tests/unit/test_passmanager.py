"""Pass registry, pipeline grammar, plugins, instrumentation, --check-numerics."""

from __future__ import annotations

import textwrap

import pytest

from irkit.errors import InputError, NumericsError, PipelineError
from irkit.passmanager import (PASSES, PassContext, PassManager, load_pass_plugin, make_pass, parse_pipeline,
                               pipeline_text)
from irkit.rewrite import RewriteLimitError
from irkit.testing.blocks import gpt2_style_module


def test_pipeline_grammar() -> None:
    ps = parse_pipeline("builtin.module(canonicalize{max-rewrites=50}, func.func(cse)), dce")
    assert [p.name for p in ps] == ["canonicalize", "cse", "dce"]
    assert ps[0].max_rewrites == 50
    assert pipeline_text(ps) == "canonicalize{max-rewrites=50},cse,dce"
    assert parse_pipeline("") == []


@pytest.mark.parametrize("text,msg", [
    ("canonicalise", "unknown pass 'canonicalise'; did you mean 'canonicalize'?"),
    ("canonicalize{bogus=1}", "pass 'canonicalize' has no option 'bogus' (options: max-rewrites)"),
    ("canonicalize{max-rewrites=many}", "option 'max-rewrites' wants int, got 'many'"),
    ("cse,,dce", "expected a pass name"),
    ("cse(dce)", "is not an anchor"),
    ("canonicalize{max-rewrites=1", "missing '}'"),
])
def test_pipeline_errors(text: str, msg: str) -> None:
    with pytest.raises(PipelineError, match=msg.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?")):
        parse_pipeline(text)


PLUGIN = textwrap.dedent('''
    from __future__ import annotations
    from dataclasses import dataclass
    from irkit.passmanager import Pass, register_pass


    @register_pass("test-scale-outputs")
    @dataclass(frozen=True)
    class ScaleOutputs(Pass):
        """Multiply every function output by a factor (a deliberately wrong pass)."""

        factor: float = 2.0
        """The factor."""

        def run(self, module, ctx):
            from irkit.ir import Builder
            from irkit.ir.types import DType
            for f in module.functions:
                ret = f.body.terminator
                b = Builder.before_op(ret)
                for i, v in enumerate(ret.operands):
                    ret.set_operand(i, b.mul(v, b.scalar(self.factor, v.dtype)))
            ctx.count("outputs-scaled")
            return True
''')


def test_plugin_file_and_check_numerics(tmp_path) -> None:
    f = tmp_path / "plugin.py"
    f.write_text(PLUGIN)
    added = load_pass_plugin(str(f))
    assert added == ["test-scale-outputs"] or "test-scale-outputs" in PASSES
    opts = {o.name: o for o in PASSES["test-scale-outputs"].options()}
    assert opts["factor"].doc == "The factor." and opts["factor"].default == 2.0
    m = gpt2_style_module(layers=1)
    pm = PassManager("canonicalize,test-scale-outputs{factor=3.0},cse", check_numerics=True)
    with pytest.raises(NumericsError, match=r"pass 'test-scale-outputs\{factor=3.0\}' broke numerics: output 0"):
        pm.run(m)
    # the identity factor keeps numerics
    PassManager("test-scale-outputs{factor=1.0}", check_numerics=True).run(gpt2_style_module(layers=1))


def test_instrumentation(capsys) -> None:
    import io

    out = io.StringIO()
    m = gpt2_style_module(layers=1)
    pm = PassManager("canonicalize,cse,dce", print_after_change=True, timing=True, statistics=True, out=out)
    pm.run(m)
    dump = out.getvalue()
    assert "IR Dump After canonicalize" in dump and "IR Dump After cse" in dump
    assert "IR Dump After dce" not in dump  # dce found nothing after cse
    assert [t.name for t in pm.timings] == ["canonicalize", "cse", "dce"]
    assert "Pass execution timing report" in pm.timing_report()
    assert "ops-eliminated" in pm.statistics_report()


def test_rewrite_bound_names_the_pattern() -> None:
    from irkit.ir import Builder, DType, Module, TensorType, new_function
    from irkit.rewrite import Fail, Match, Pattern, apply_patterns

    class Flip(Pattern):
        name = "flip-forever"
        roots = ("ik.neg",)

        def match(self, op):
            return Match() if op.operand(0).producer is None else Fail("operand is produced")

        def rewrite(self, rw, op, m):
            new = rw.create(op, "ik.neg", [op.operand(0)]).results[0]
            rw.replace_op(op, [new])

    f, b = new_function("main", [TensorType((2,), DType.f32)])
    b.ret(b.neg(f.args[0]))
    with pytest.raises(RewriteLimitError, match="pattern 'flip-forever' fired"):
        apply_patterns(Module([f]), [Flip()], max_rewrites=50)


def test_every_pass_has_docs() -> None:
    from irkit.passmanager import load_builtin_passes

    load_builtin_passes()
    for name, cls in PASSES.items():
        if name.startswith("test-"):
            continue
        assert cls.summary(), f"pass {name} has no docstring"
        assert "before" in cls.description() and "after" in cls.description(), f"pass {name}: no before/after"
        make_pass(name).run(gpt2_style_module(layers=1), PassContext())


WRONG_PLUGINS = textwrap.dedent('''
    from dataclasses import dataclass

    from irkit.ir import DType
    from irkit.passmanager import Pass, register_pass
    from irkit.rewrite import Match, Pattern, RewriteReport, apply_patterns


    class AddToSub(Pattern):
        name = "test-add-to-sub"
        roots = ("ik.add",)

        def match(self, op):
            return Match()

        def rewrite(self, rw, op, m):
            rw.replace_op(op, [rw.create(op, "ik.sub", list(op.operands)).results[0]])


    class AddToHalf(Pattern):
        name = "test-add-to-half"
        roots = ("ik.add",)

        def match(self, op):
            return Match()

        def rewrite(self, rw, op, m):
            rw.replace_op(op, [rw.create(op, "ik.cast", [op.operand(0)], {"to": DType.f16}).results[0]])


    @register_pass("test-wrong-add")
    @dataclass(frozen=True)
    class WrongAdd(Pass):
        """Rewrites add into sub and never mentions --check-rewrites."""

        def run(self, module, ctx):
            rep = RewriteReport()
            changed = apply_patterns(module, [AddToSub()], report=rep)
            ctx.absorb(rep)
            return changed


    @register_pass("test-wrong-type")
    @dataclass(frozen=True)
    class WrongType(Pass):
        """Replaces an f32 value by an f16 one."""

        def run(self, module, ctx):
            return apply_patterns(module, [AddToHalf()])


    @register_pass("test-raises")
    @dataclass(frozen=True)
    class Raises(Pass):
        """Fails with a KeyError."""

        def run(self, module, ctx):
            return {}["missing"]
''')


@pytest.fixture(scope="module")
def wrong_plugin(tmp_path_factory) -> str:
    f = tmp_path_factory.mktemp("plug") / "wrong_passes.py"
    f.write_text(WRONG_PLUGINS)
    load_pass_plugin(str(f))
    return str(f)


def test_check_rewrites_reaches_plugin_passes(wrong_plugin: str) -> None:
    """The pass manager hooks --check-rewrites into every pass; the plugin adds no line for it."""
    ctx = PassContext(check_rewrites=True)
    with pytest.raises(NumericsError, match="pattern 'test-add-to-sub' .* changed the numbers"):
        PassManager("test-wrong-add", ctx=ctx).run(gpt2_style_module(layers=1))
    # without the flag the same pass runs (and is wrong): the check is what catches it
    PassManager("test-wrong-add").run(gpt2_style_module(layers=1))


@pytest.mark.parametrize("pipeline,msg", [
    ("test-raises", r"pass 'test-raises' \(.*wrong_passes.py:\d+\) raised KeyError: 'missing'"),
    ("test-wrong-type", r"pass 'test-wrong-type' \(.*wrong_passes.py:\d+\) raised ValueError: .*type tensor"),
])
def test_plugin_failures_are_the_plugins(wrong_plugin: str, pipeline: str, msg: str) -> None:
    from irkit.passmanager import PluginError

    with pytest.raises(PluginError, match=msg):
        PassManager(pipeline).run(gpt2_style_module(layers=1))


def test_plugin_reusing_a_builtin_name_is_told(tmp_path) -> None:
    f = tmp_path / "dup.py"
    f.write_text(textwrap.dedent('''
        from dataclasses import dataclass
        from irkit.passmanager import Pass, register_pass

        @register_pass("cse")
        @dataclass(frozen=True)
        class MyCse(Pass):
            def run(self, module, ctx):
                return False
    '''))
    with pytest.raises(InputError, match=r"dup.py: .*pass 'cse' is already registered by irkit\.passes\.cse\."):
        load_pass_plugin(str(f))
    assert PASSES["cse"].__module__ == "irkit.passes.cse"
