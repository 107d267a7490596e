"""Streaming features used by queries: top-k, window sum/average/variance, count-distinct.

One algorithm per module, each an incremental class fed batches of items in stream order:

=================  ==========================  ==========================================
SAL operator       class                       module / paper
=================  ==========================  ==========================================
``topk``           :class:`TopK`               :mod:`.topk` (Golab et al., IMC 2003)
``ehsum/ehave``    :class:`SlidingStat`        :mod:`.exponential_histogram` (Datar et
``ehvar``                                      al., SIAM J. Comput. 2002)
``countdistinct``  :class:`CountDistinct`      :mod:`.count_distinct`
=================  ==========================  ==========================================

Semantics shared by all (see :mod:`.base`): windows count items; the value at stream
position p is the state after consuming every item at or before p; results do not depend on
how the stream is cut into batches. :func:`make_feature` builds one from a SAL
``FOREACH ... GENERATE`` statement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from graphcep.features.base import (
    DEFAULT_MAX_KEYS,
    Feature,
    FeatureDefinitionError,
    FeatureError,
    FeatureInputError,
    FeatureStateError,
    NumericFeature,
    SetFeature,
)
from graphcep.features.count_distinct import CountDistinct
from graphcep.features.exponential_histogram import (
    OPERATOR_STATS,
    ExponentialHistogram,
    SlidingStat,
)
from graphcep.features.topk import TopK, top_k_values

if TYPE_CHECKING:  # features know events only; the definition is read by attribute
    from graphcep.patterns.program import FeatureDef

__all__ = [
    "DEFAULT_MAX_KEYS",
    "CountDistinct",
    "ExponentialHistogram",
    "Feature",
    "FeatureDefinitionError",
    "FeatureError",
    "FeatureInputError",
    "FeatureStateError",
    "NumericFeature",
    "SetFeature",
    "SlidingStat",
    "TopK",
    "make_feature",
    "top_k_values",
]

#: Numeric parameters each operator takes after the field.
_PARAMS = {"topk": 3, "ehsum": 1, "ehave": 1, "ehvar": 1, "countdistinct": 1}


def make_feature(
    defn: FeatureDef,
    keys: tuple[str, ...] = (),
    *,
    max_keys: int = DEFAULT_MAX_KEYS,
    mode: Literal["exact", "eh"] = "exact",
    epsilon: float = 0.01,
) -> TopK | SlidingStat | CountDistinct:
    """Build the feature a SAL ``X = FOREACH S GENERATE op(field, ...);`` defines.

    ``keys`` are the key fields when ``S`` is a keyed stream (``STREAM Netflows BY
    DestIp``). ``mode``/``epsilon`` choose exact statistics or exponential histograms for
    ``eh*``; ``max_keys`` bounds the keys (or distinct window values) a feature holds.

    >>> from graphcep.patterns.program import FeatureDef
    >>> top = make_feature(FeatureDef("Top1000", "Netflows", "topk", "DestIp", (100000, 10000, 1000)))
    >>> type(top).__name__, top.window, top.basic_window, top.k
    ('TopK', 100000, 10000, 1000)
    >>> make_feature(FeatureDef("S", "VertsByDest", "ehsum", "SrcTotalBytes", (1000,)), ("DestIp",)).stat
    'sum'
    """
    op = defn.operator.lower()
    if op not in _PARAMS:
        raise FeatureDefinitionError(
            f"feature {defn.name}: unknown operator {defn.operator!r}; known: {sorted(_PARAMS)}"
        )
    params = tuple(defn.params)
    if len(params) != _PARAMS[op]:
        raise FeatureDefinitionError(
            f"feature {defn.name}: {op} takes a field and {_PARAMS[op]} number(s), "
            f"got {len(params)}: {params}"
        )
    keys = tuple(keys)
    if op == "topk":
        if keys:
            raise FeatureDefinitionError(
                f"feature {defn.name}: topk over a keyed stream ({defn.stream} by "
                f"{', '.join(keys)}) is not supported; apply it to the unkeyed stream"
            )
        window, basic, k = params
        return TopK(defn.field, window, basic, k, name=defn.name, max_keys=max_keys)
    if op == "countdistinct":
        return CountDistinct(
            defn.field, params[0], key_fields=keys, name=defn.name, max_keys=max_keys
        )
    return SlidingStat(
        OPERATOR_STATS[op],
        defn.field,
        params[0],
        key_fields=keys,
        mode=mode,
        epsilon=epsilon,
        name=defn.name,
        max_keys=max_keys,
    )
