"""Score tables batch by batch on a distributed engine (Ray Data, Spark's ``mapInPandas``).

:class:`BatchEvaluator` is picklable: built on the driver, it makes its client on the worker on
first call and turns each pandas batch into what ``evaluate_dataframe`` returns.
:mod:`composo.ray` adds a cluster-wide request budget; on Spark, give each executor its share.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from composo._cache import CacheOption, open_cache
from composo._client import Composo
from composo._core import limits
from composo._core.ratelimit import Permits, check_requests_per_minute
from composo._siblings import settings_of
from composo.errors import ComposoValidationError

__all__ = ["BatchEvaluator"]


class BatchEvaluator:
    """Evaluate a batch of rows (a pandas DataFrame, a pyarrow Table or a dict of columns).

    Args:
        criteria: A criterion, a list, or ``{name: criterion}`` (names prefix the result
            columns).
        columns: Role -> column name where yours differ (see ``evaluate_dataframe``).
        evaluator_name: Saved evaluator name(s), instead of ``criteria``.
        api_key: The API key (default: ``COMPOSO_API_KEY``, read here on the driver).
        base_url: The API's base URL (default: ``COMPOSO_BASE_URL``, read here).
        max_concurrent_requests: Requests in flight from this worker.
        requests_per_minute: Requests this worker may start per minute (``None``: no limit).
        num_retries: Retries after the first attempt.
        timeout: Seconds one call may take.
        model_core: The model core for every row.
        cache: As the clients' ``cache=``: answers kept on the worker's disk.
        **options: :class:`~composo.types.EvaluateOptions` for every row.

    Raises:
        ComposoValidationError: No API key, or unusable criteria or options (on the driver).
    """

    def __init__(
        self,
        criteria: str | Sequence[str] | Mapping[str, str] | None = None,
        *,
        columns: Mapping[str, str] | None = None,
        evaluator_name: str | Sequence[str] | Mapping[str, str] | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        max_concurrent_requests: int = limits.DEFAULT_MAX_CONCURRENT_REQUESTS,
        requests_per_minute: float | None = None,
        num_retries: int = limits.DEFAULT_NUM_RETRIES,
        timeout: float = limits.DEFAULT_TIMEOUT,
        model_core: str | None = None,
        cache: CacheOption = None,
        **options: Any,
    ) -> None:
        from composo._data.frames import plan_frame

        key = api_key if api_key is not None else os.environ.get("COMPOSO_API_KEY")
        if not key or not key.strip():
            raise ComposoValidationError(
                "api_key: no API key; pass api_key=... or set COMPOSO_API_KEY on the driver"
            )
        plan_frame(criteria, evaluator_name, options)  # mistakes surface here, not in a batch
        self.criteria = criteria
        self.columns = dict(columns) if columns is not None else None
        self.evaluator_name = evaluator_name
        self._api_key = key.strip()
        self.base_url = base_url or os.environ.get("COMPOSO_BASE_URL")
        self.max_concurrent_requests = max_concurrent_requests
        self.requests_per_minute = check_requests_per_minute(requests_per_minute)
        self.num_retries = num_retries
        self.timeout = timeout
        self.model_core = model_core
        self.cache = open_cache(cache)
        self.options = options
        self._client: Composo | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(criteria={self.criteria!r}, base_url={self.base_url!r}, "
            f"api_key='***', max_concurrent_requests={self.max_concurrent_requests})"
        )

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None, "_lock": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def client(self) -> Composo:
        """This worker's client, made on first use: it paces the worker to
        ``requests_per_minute`` and takes its ``permits=`` from :meth:`_permits` (a cluster
        budget)."""
        with self._lock:
            if self._client is None:
                self._client = Composo(**settings_of(self, self._api_key), permits=self._permits())
            return self._client

    def _permits(self) -> Permits | None:
        """Where each request also takes a permit; :mod:`composo.ray` gives its budget."""
        return None

    def __call__(self, batch: Any) -> Any:
        """The batch with its result columns (a pandas DataFrame).

        Args:
            batch: A pandas DataFrame, a pyarrow Table or a dict of column arrays.

        Returns:
            A pandas DataFrame: the batch's columns, then the result columns.
        """
        import pandas as pd

        if isinstance(batch, Mapping):
            frame = pd.DataFrame({k: list(v) for k, v in batch.items()})
        elif type(batch).__module__.startswith("pyarrow"):
            frame = batch.to_pandas()
        else:
            frame = batch
        return self.client().evaluate_dataframe(
            frame,
            self.criteria,
            columns=self.columns,
            evaluator_name=self.evaluator_name,
            **self.options,
        )
