"""The features one query's vertex constraints need, fed from the edge stream.

:class:`FeatureSet` is what :class:`graphcep.engines.subgraph.SubgraphEngine` calls: every
pushed batch updates each feature with its field's values at the edges' global stream
positions, and ``x in F`` is answered as of the position of the match's last edge.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from graphcep.features import SetFeature, make_feature


class FeatureSet:
    """Named set-valued features (``topk``) usable in ``x in F`` constraints.

    Parameters
    ----------
    definitions
        Feature name -> a SAL ``FeatureDef`` (``FOREACH S GENERATE topk(...)``).
    field_aliases
        Stream-native field names -> edge-schema columns (``DestIp`` -> ``dst``).
    """

    def __init__(self, definitions: Mapping, field_aliases: Mapping[str, str] | None = None):
        aliases = dict(field_aliases or {})
        self._features: dict[str, SetFeature] = {}
        self._columns: dict[str, str] = {}
        for name, defn in definitions.items():
            if defn.operator != "topk":
                raise ValueError(
                    f"feature {name!r} ({defn.operator}) gives a number per key, not a set of "
                    f"vertices, so it cannot be used as 'x in {name}'; use a topk feature"
                )
            self._features[name] = make_feature(defn)
            self._columns[name] = aliases.get(defn.field, defn.field)

    def update(self, batch: pa.Table, first_position: int) -> None:
        if "pos" in batch.column_names:
            positions = batch.column("pos").to_numpy()
        else:
            positions = np.arange(first_position, first_position + batch.num_rows, dtype=np.int64)
        for name, feature in self._features.items():
            column = self._columns[name]
            if column not in batch.column_names:
                raise ValueError(
                    f"feature {name!r} reads field {column!r}, which the stream lacks; "
                    f"fields are {batch.column_names}"
                )
            values = batch.column(column).to_numpy(zero_copy_only=False)
            feature.update(values, positions=positions)

    def member(self, feature: str, vertices: np.ndarray, positions: np.ndarray) -> np.ndarray:
        if feature not in self._features:
            raise KeyError(f"unknown feature {feature!r}; defined: {sorted(self._features)}")
        return self._features[feature].membership(vertices, positions)
