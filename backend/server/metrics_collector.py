"""Prometheus view of the engine stats, read at scrape time (exact, no double bookkeeping).

The metrics are the :class:`StatsSnapshot` fields that name one (``metric_field``), found by
walking the model; the fields of a list's items (the GPUs) become labelled families.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from backend.engine.stats_model import StatsSnapshot
from backend.system.system_stats import METRIC_KEY, METRIC_TYPE_KEY


@dataclass(frozen=True)
class MetricSpec:
    """One exported field: its metric and where its value sits in a snapshot."""

    name: str
    help: str
    metric_type: str
    path: tuple[str, ...]  # attribute names from the snapshot to the value (or to the list)
    item_field: str | None = None  # for a list: the field of each item
    label: tuple[str, str] | None = None  # for a list: label name, item field with its value

    def family(self) -> CounterMetricFamily | GaugeMetricFamily:
        cls = CounterMetricFamily if self.metric_type == "counter" else GaugeMetricFamily
        labels = [self.label[0]] if self.label else None
        return cls(self.name, self.help, labels=labels)


def _spec(
    field: FieldInfo,
    path: tuple[str, ...],
    item_field: str | None = None,
    label: tuple[str, str] | None = None,
) -> MetricSpec | None:
    extra = field.json_schema_extra
    if not isinstance(extra, dict) or METRIC_KEY not in extra:
        return None
    name, metric_type = str(extra[METRIC_KEY]), str(extra[METRIC_TYPE_KEY])
    return MetricSpec(name, field.description or "", metric_type, path, item_field, label)


def _model_type(annotation: object) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def metric_specs(model: type[BaseModel], path: tuple[str, ...] = ()) -> Iterator[MetricSpec]:
    """Every exported field of ``model`` and of its sections, in declaration order."""
    for name, field in model.model_fields.items():
        here = (*path, name)
        section = _model_type(field.annotation)
        is_list = typing.get_origin(field.annotation) is list
        item = _model_type(typing.get_args(field.annotation)[0]) if is_list else None
        if section is not None:
            yield from metric_specs(section, here)
            continue
        if item is None:
            specs = [_spec(field, here)]
        else:
            label: tuple[str, str] | None = getattr(item, "metric_label", None)
            if label is None:
                raise TypeError(f"{item.__name__} needs metric_label to be exported per item")
            specs = [_spec(f, here, n, label) for n, f in item.model_fields.items()]
        yield from (spec for spec in specs if spec is not None)


SPECS = tuple(metric_specs(StatsSnapshot))


def _at(snapshot: StatsSnapshot, path: tuple[str, ...]) -> Any:
    value: Any = snapshot
    for name in path:
        value = getattr(value, name)
    return value


class EngineCollector(Collector):
    def __init__(self, snapshot: Callable[[], StatsSnapshot | None]) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        snap = self._snapshot()
        if snap is None:
            return
        for spec in SPECS:
            value = _at(snap, spec.path)
            family = spec.family()
            if spec.item_field is None:
                if value is None:  # a latency percentile before its first sample
                    continue
                family.add_metric([], float(value))
            else:
                assert spec.label is not None
                for item in value:
                    label = str(getattr(item, spec.label[1]))
                    family.add_metric([label], float(getattr(item, spec.item_field)))
            yield family
