"""Decaying exponential histograms, as the Kubernetes VPA recommender builds them (reference A.9.2).

Bucket ``i`` of an exponential histogram starts at ``first × (ratio^i − 1)/(ratio − 1)``; bucket 0
covers ``[0, first)`` and the last bucket has no upper bound. A *decaying* histogram weighs a sample
taken at ``t`` by ``2^((t − reference)/half_life)``, so a sample one half-life younger counts twice as
much. To keep the numbers bounded the reference timestamp is moved forward (and every weight scaled
down by the same power of two) once a sample lands more than 100 half-lives after it.

Plain floats throughout (IEEE doubles, as Go's float64) with the VPA's order of operations, so the
percentiles match Koordinator's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

# A sample later than reference + MAX_DECAY_EXPONENT half-lives renormalises the histogram.
MAX_DECAY_EXPONENT = 100


class CheckpointError(ValueError):
    """A histogram or model checkpoint that cannot be loaded (the message names the bad field)."""


def _log(base: float, x: float) -> float:
    return math.log(x) / math.log(base)


@dataclass(frozen=True)
class ExponentialOptions:
    """Bucket geometry: values up to ``max_value``, first bucket ``first_bucket_size`` wide, each next
    bucket ``ratio`` times wider; weights below ``epsilon`` count as empty."""

    max_value: float
    first_bucket_size: float
    ratio: float
    epsilon: float
    num_buckets: int = field(init=False)

    def __post_init__(self) -> None:
        if self.max_value <= 0 or self.first_bucket_size <= 0 or self.ratio <= 1 or self.epsilon <= 0:
            raise ValueError(f"invalid histogram options (max_value={self.max_value!r}, first_bucket_size="
                             f"{self.first_bucket_size!r}, ratio={self.ratio!r}, epsilon={self.epsilon!r}): max_value, first_bucket_size and epsilon "
                             "must be positive and ratio > 1")
        # The smallest n with first × (ratio^n − 1)/(ratio − 1) ≥ max_value, plus the open last bucket.
        n = int(math.ceil(_log(self.ratio, self.max_value * (self.ratio - 1) / self.first_bucket_size + 1))) + 1
        object.__setattr__(self, "num_buckets", n)

    def find_bucket(self, value: float) -> int:
        """Index of the bucket holding ``value`` (values past the last start go to the last bucket)."""
        if value < self.first_bucket_size:
            return 0
        bucket = int(_log(self.ratio, value * (self.ratio - 1) / self.first_bucket_size + 1))
        return min(bucket, self.num_buckets - 1)

    def bucket_start(self, bucket: int) -> float:
        """Lower bound of bucket ``bucket``."""
        if not 0 <= bucket < self.num_buckets:
            raise IndexError(f"bucket {bucket} out of range [0, {self.num_buckets})")
        if bucket == 0:
            return 0.0
        return self.first_bucket_size * (self.ratio ** bucket - 1) / (self.ratio - 1)


def _round_half_away(x: float) -> float:
    """Go's math.Round / time.Round: halves away from zero (Python's round() goes to even)."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


class DecayingHistogram:
    """A histogram of samples whose weights decay by half every ``half_life`` seconds.

    Not thread-safe: the owner (a model in the predictor) serialises access.
    """

    __slots__ = ("options", "half_life", "reference_timestamp", "total_weight", "_weights", "_min", "_max")

    def __init__(self, options: ExponentialOptions, half_life: float) -> None:
        if half_life <= 0:
            raise ValueError(f"invalid half-life {half_life!r}: must be positive")
        self.options = options
        self.half_life = float(half_life)
        self.reference_timestamp = 0.0  # unix seconds; the first sample moves it to its own time
        self.total_weight = 0.0
        self._weights = [0.0] * options.num_buckets
        self._reset_bounds()

    def _reset_bounds(self) -> None:
        # Empty: min past max, so that the first sample sets both.
        self._min = self.options.num_buckets - 1
        self._max = 0

    # -- samples -----------------------------------------------------------------------------------

    def add_sample(self, value: float, weight: float, timestamp: float) -> None:
        """Add ``value`` with ``weight`` (before decay) observed at ``timestamp`` (unix seconds)."""
        if weight < 0:
            raise ValueError(f"sample weight must be non-negative, got {weight!r}")
        self._add(value, weight * self._decay_factor(timestamp))

    def _add(self, value: float, weight: float) -> None:
        bucket = self.options.find_bucket(value)
        self._weights[bucket] += weight
        self.total_weight += weight
        eps = self.options.epsilon
        if bucket < self._min and self._weights[bucket] >= eps:
            self._min = bucket
        if bucket > self._max and self._weights[bucket] >= eps:
            self._max = bucket

    def _decay_factor(self, timestamp: float) -> float:
        if timestamp > self.reference_timestamp + self.half_life * MAX_DECAY_EXPONENT:
            self.shift_reference(timestamp)
        return 2.0 ** ((timestamp - self.reference_timestamp) / self.half_life)

    def shift_reference(self, timestamp: float) -> None:
        """Move the reference to ``timestamp`` rounded to a whole number of half-lives, rescaling weights
        so that every percentile stays the same."""
        new_ref = _round_half_away(timestamp / self.half_life) * self.half_life
        exponent = int(_round_half_away((self.reference_timestamp - new_ref) / self.half_life))
        self._scale(math.ldexp(1.0, exponent))
        self.reference_timestamp = new_ref

    def _scale(self, factor: float) -> None:
        for b in range(self._min, self._max + 1):
            self._weights[b] *= factor
        self.total_weight *= factor
        # Some buckets may have decayed below epsilon: they no longer bound the histogram.
        self._update_bounds()

    def _update_bounds(self) -> None:
        eps = self.options.epsilon
        last = self.options.num_buckets - 1
        w = self._weights
        while w[self._min] < eps and self._min < last:
            self._min += 1
        while w[self._max] < eps and self._max > 0:
            self._max -= 1

    # -- reading -----------------------------------------------------------------------------------

    def is_empty(self) -> bool:
        """True when no bucket holds at least epsilon of weight."""
        return self._weights[self._min] < self.options.epsilon

    def percentile(self, p: float) -> float:
        """The end of the bucket where the running weight (from the smallest bucket) reaches ``p`` of
        the total; the start of the last bucket when it is that one; 0 for an empty histogram."""
        if self.is_empty():
            return 0.0
        threshold = p * self.total_weight
        partial = 0.0
        bucket = self._min
        while bucket < self._max:
            partial += self._weights[bucket]
            if partial >= threshold:
                break
            bucket += 1
        if bucket < self.options.num_buckets - 1:
            return self.options.bucket_start(bucket + 1)
        return self.options.bucket_start(bucket)

    def bucket_weights(self) -> dict[int, float]:
        """Non-zero bucket weights between the smallest and largest non-empty bucket (for tests and
        checkpoints)."""
        if self.is_empty():
            return {}
        return {b: self._weights[b] for b in range(self._min, self._max + 1) if self._weights[b] > 0}

    # -- checkpoints -------------------------------------------------------------------------------

    def to_checkpoint(self) -> dict[str, Any]:
        """A compact JSON-able form: reference timestamp, total weight and ``[bucket, weight]`` pairs."""
        return {"ref": self.reference_timestamp, "total": self.total_weight,
                "buckets": [[b, w] for b, w in self.bucket_weights().items()]}

    def load_checkpoint(self, data: Any) -> None:
        """Replace this histogram's content with a checkpoint from :meth:`to_checkpoint`.

        Raises :class:`CheckpointError` naming the bad field; the histogram is unchanged then.
        """
        if not isinstance(data, dict):
            raise CheckpointError(f"histogram checkpoint must be an object, got {type(data).__name__}")
        ref = _finite(data.get("ref"), "ref")
        total = _finite(data.get("total"), "total")
        if total < 0:
            raise CheckpointError(f"total: must be non-negative, got {total!r}")
        pairs = data.get("buckets")
        if not isinstance(pairs, list):
            raise CheckpointError(f"buckets: must be a list of [bucket, weight], got {pairs!r}")
        weights = [0.0] * self.options.num_buckets
        for i, pair in enumerate(pairs):
            if (not isinstance(pair, list) or len(pair) != 2 or isinstance(pair[0], bool)
                    or not isinstance(pair[0], int)):
                raise CheckpointError(f"buckets[{i}]: must be [bucket, weight], got {pair!r}")
            b = pair[0]
            if not 0 <= b < self.options.num_buckets:
                raise CheckpointError(f"buckets[{i}]: bucket {b} out of range [0, {self.options.num_buckets})")
            w = _finite(pair[1], f"buckets[{i}] weight")
            if w < 0:
                raise CheckpointError(f"buckets[{i}]: weight must be non-negative, got {w!r}")
            weights[b] = w
        self.reference_timestamp = ref
        self.total_weight = total
        self._weights = weights
        self._reset_bounds()
        eps = self.options.epsilon
        nonempty = [b for b, w in enumerate(weights) if w >= eps]
        if nonempty:
            self._min, self._max = nonempty[0], nonempty[-1]


def _finite(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise CheckpointError(f"{name}: must be a finite number, got {value!r}")
    return float(value)
