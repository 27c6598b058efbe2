"""Pattern rewriting: patterns with failure reasons, the rewriter, the greedy driver, rule tables."""

from __future__ import annotations

from irkit.rewrite.driver import RewriteLimitError, apply_patterns
from irkit.rewrite.pattern import (
           Fail,
           Match,
           NearMiss,
           Pattern,
           PatternStats,
           Rewriter,
           RewriteReport,
)
from irkit.rewrite.rules import C, P, Rule, V, rule_patterns, splat_constant

__all__ = ["RewriteLimitError", "apply_patterns", "Fail", "Match", "NearMiss", "Pattern", "PatternStats",
           "Rewriter", "RewriteReport", "C", "P", "Rule", "V", "rule_patterns", "splat_constant"]
