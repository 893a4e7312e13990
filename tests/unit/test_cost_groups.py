"""A cost group is the resources alike in every dimension but themselves (billing/rollup.py): two groups never share
a key, whatever their values hold (review of issue 27: tags joined as ``k=v`` made ``{"a=b": "c"}`` and
``{"a": "b=c"}`` one group, and a query by tag ``a`` wrong)."""

from __future__ import annotations

from dataclasses import replace

from itl_accelerator.billing.rollup import CostDimensions, cost_group_scope, group_dimensions

BASE = CostDimensions("RES#/r/a#t", "/r/a", "a", "ITL.Accelerator/sparkJobs", "rg1", "ann", "/n/1", "sup", ())


def test_values_that_would_run_together_are_two_groups():
    assert cost_group_scope(replace(BASE, tags=(("a=b", "c"),))) != cost_group_scope(
        replace(BASE, tags=(("a", "b=c"),))
    )
    assert cost_group_scope(replace(BASE, resource_group="rg1", submitted_by="ann")) != cost_group_scope(
        replace(BASE, resource_group="rg1a", submitted_by="nn")
    )


def test_resources_alike_but_for_themselves_are_one_group_and_case_counts():
    other = replace(BASE, resource_scope="RES#/r/b#t", resource_id="/r/b", resource_name="b")
    assert cost_group_scope(BASE) == cost_group_scope(other)
    assert group_dimensions(BASE) == group_dimensions(other)
    assert group_dimensions(BASE).resource_id == "" and group_dimensions(BASE).resource_name == ""
    assert cost_group_scope(replace(BASE, resource_group="RG1")) != cost_group_scope(BASE)  # shown as stored
