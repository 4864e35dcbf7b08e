"""A second implementation of the batch stream's sampling, written in pure
Python from docs/batch-stream.md ("How windows are drawn", "Documents",
"Schedules", "The state") and not from the library's code: Philox4x64-10,
the keyed Feistel permutation with cycle walking, segments and ordinals, the
unweighted epoch cursor, the golden-ratio deal of a weighted mixture with a
cursor per source, the per-sample rule of version 1 and 2 states, ranks, and
the document pieces of a batch. Each closed form of the guide (an unweighted
cursor per segment, a source's count of samples by a floor sum) also has
its rule walked one step or one sample at a time, so the two can be held to
each other.

test_batch_stream_rules.py checks it against itself, NumPy and the saved
fixtures; test_batch_stream_reference.py holds the library to it."""
import bisect
import math

from support import optional_module

numpy = optional_module("numpy")

MASK64 = (1 << 64) - 1


# --- Philox4x64-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as
# easy as 1, 2, 3", SC 2011) ---------------------------------------------------
PHILOX_M0 = 0xD2E7470EE14C6C93
PHILOX_M1 = 0xCA5A826395121157
PHILOX_W0 = 0x9E3779B97F4A7C15  # the golden ratio
PHILOX_W1 = 0xBB67AE8584CAA73B  # sqrt(3) - 1


def philox(seed, c0, c1, c2, c3):
    """The four output words for counter (c0, c1, c2, c3) and key (seed, 0)."""
    counter = [c0 & MASK64, c1 & MASK64, c2 & MASK64, c3 & MASK64]
    k0, k1 = seed & MASK64, 0
    for round_index in range(10):
        if round_index > 0:
            k0, k1 = (k0 + PHILOX_W0) & MASK64, (k1 + PHILOX_W1) & MASK64
        product0 = PHILOX_M0 * counter[0]
        product1 = PHILOX_M1 * counter[2]
        hi0, lo0 = product0 >> 64, product0 & MASK64
        hi1, lo1 = product1 >> 64, product1 & MASK64
        counter = [hi1 ^ counter[1] ^ k0, lo1, hi0 ^ counter[3] ^ k1, lo0]
    return counter


def random(seed, c0, c1, c2, c3):
    return philox(seed, c0, c1, c2, c3)[0]


# --- the keyed permutation P(n, e, q) --------------------------------------------
def mix(z):
    """SplitMix64's finaliser."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


class Permutation:
    """P(n, e, q): a bijection of [0, n) for epoch e and stream q."""

    def __init__(self, seed, n, epoch, stream):
        bits = (n - 1).bit_length() or 1
        self.n = n
        self.half = max(1, math.ceil(bits / 2))
        self.mask = (1 << self.half) - 1
        self.keys = [random(seed, epoch, r, 1, stream) for r in range(6)]

    def feistel(self, x):
        left, right = x >> self.half, x & self.mask
        for key in self.keys:
            left, right = right, left ^ (mix((right ^ key) & MASK64) & self.mask)
        return (left << self.half) | right

    def __call__(self, x):
        x = self.feistel(x)
        while x >= self.n:  # cycle walking back into [0, n)
            x = self.feistel(x)
        return x


# --- the golden-ratio deal --------------------------------------------------------
TWO64 = 1 << 64
GOLDEN = 0x9E3779B97F4A7C15  # phi: 2^64 over the golden ratio, rounded down (odd)


def floor_sum(count, modulus, multiplier, offset):
    """sum over r < count of floor((multiplier * r + offset) / modulus), in
    exact integers, by the Euclid-like reduction: O(log) rounds. count >= 0,
    modulus >= 1, multiplier and offset >= 0."""
    total = 0
    while count > 0:
        if multiplier >= modulus:
            total += count * (count - 1) // 2 * (multiplier // modulus)
            multiplier %= modulus
        if offset >= modulus:
            total += count * (offset // modulus)
            offset %= modulus
        top = multiplier * count + offset
        if top < modulus:
            break
        count, offset = divmod(top, modulus)
        modulus, multiplier = multiplier, modulus
    return total


def golden_floor_sum(count, offset):
    """The guide's F(R, b) = sum over r < R of floor((r * phi + b) / 2^64)."""
    return floor_sum(count, TWO64, GOLDEN, offset)


def dealt_below(key, first, count, bound):
    """How many ordinals n of [first, first + count) have v_n < bound, where
    v_n = (n * phi + key) mod 2^64: the guide's closed form
    R - (F(R, beta + 2^64 - K) - F(R, beta)), beta = (a * phi + k) mod 2^64,
    in exact integers (beta + 2^64 - K is not reduced mod 2^64); each full
    period of 2^64 ordinals holds exactly K of them."""
    periods, count = divmod(count, TWO64)
    beta = (first * GOLDEN + key) % TWO64
    return periods * bound + count - (golden_floor_sum(count, beta + TWO64 - bound) - golden_floor_sum(count, beta))


def cumulative_weights(weights):
    """c_j = (w_0 + ... + w_j) / (w_0 + ... + w_{S-1}) in doubles, summed left
    to right; 1.0 exactly from the last source of positive weight on."""
    total = 0.0
    for weight in weights:
        total += weight
    running, cumulative = 0.0, []
    for weight in weights:
        running += weight
        cumulative.append(running / total)
    last_positive = max(index for index, weight in enumerate(weights) if weight > 0)
    for index in range(last_positive, len(weights)):
        cumulative[index] = 1.0
    return cumulative


def weight_entries(weights):
    """None -> [] (unweighted); [w, ...] -> [(0, [w, ...])]; [(step, [w, ...]), ...] as given."""
    if not weights:
        return []
    if all(isinstance(weight, (int, float)) for weight in weights):
        return [(0, [float(weight) for weight in weights])]
    return [(int(step), [float(weight) for weight in entry]) for step, entry in weights]


class Segment:
    """A run of steps [begin, end) (end None: the last, endless) with one
    batch size B (per rank), one G = B x world_size, one T and, weighted,
    one set of weights; `ordinal` is O_m, the samples of every step before it."""

    def __init__(self, begin, batch_size, global_batch, context, weights, ordinal, counts):
        self.begin, self.end = begin, None
        self.batch_size, self.global_batch, self.context = batch_size, global_batch, context
        self.weights = weights
        self.ordinal = ordinal
        self.counts = counts  # N_j for this T
        self.total = sum(counts)  # N
        self.firsts = [sum(counts[:index]) for index in range(len(counts))]  # C_j
        self.cumulative = None if weights is None else cumulative_weights(weights)  # c_j
        # K_{j-1}, K_j of source j are bounds[j], bounds[j + 1] (K_{-1} = 0).
        self.bounds = None if weights is None else [0] + [int(c * 2.0**64) for c in self.cumulative]

    def end_ordinal(self):
        return None if self.end is None else self.ordinal + (self.end - self.begin) * self.global_batch


class Reference:
    """The windows of the guide's algorithm for one stream's parameters.

    schedule: entries (step, batch_size per rank, context), steps strictly
    increasing from 0. weights: None (unweighted), [w, ...] or entries
    (step, [w, ...]), steps strictly increasing from 0. documents: each
    source's document starts (windows then start at the ones whose window
    fits). mixture: "interleaved" (the golden-ratio deal with per-source
    cursors) or "per_sample" (the rule of version 1 and 2 states; one
    segment only). Every count is an exact Python integer."""

    def __init__(self, lengths, schedule, world_size=1, seed=0, weights=None, documents=None,
                 mixture="interleaved"):
        if mixture not in ("interleaved", "per_sample"):
            raise ValueError(f"mixture {mixture!r}")
        self.lengths = list(lengths)
        self.world_size = world_size
        self.seed = seed
        self.mixture = mixture
        self.documents = None if documents is None else [sorted(int(start) for start in starts)
                                                         for starts in documents]
        self.schedule = [(int(step), int(batch_size), int(context)) for step, batch_size, context in schedule]
        self.weight_schedule = weight_entries(weights)
        self.weighted = bool(self.weight_schedule)
        for name, steps in (("schedule", [entry[0] for entry in self.schedule]),
                            ("weights", [entry[0] for entry in self.weight_schedule])):
            if steps and (steps[0] != 0 or any(b <= a for a, b in zip(steps, steps[1:]))):
                raise ValueError(f"{name} steps must increase strictly from 0: {steps}")
        if not self.schedule:
            raise ValueError("an empty schedule")
        # Segments start wherever an entry of either schedule starts.
        begins = sorted({entry[0] for entry in self.schedule} | {entry[0] for entry in self.weight_schedule})
        self.segments, ordinal = [], 0
        for index, begin in enumerate(begins):
            _, batch_size, context = [entry for entry in self.schedule if entry[0] <= begin][-1]
            weights_now = ([entry for entry in self.weight_schedule if entry[0] <= begin][-1][1]
                           if self.weighted else None)
            segment = Segment(begin, batch_size, batch_size * world_size, context, weights_now, ordinal,
                              self.counts(context))
            if index + 1 < len(begins):
                segment.end = begins[index + 1]
                ordinal += (segment.end - begin) * segment.global_batch
            self.segments.append(segment)
        self.begins = begins
        if self.weighted and mixture == "per_sample" and len(self.segments) > 1:
            raise ValueError("the per_sample mixture has one segment (no schedule, no weight schedule)")
        for segment in self.segments:  # what the stream refuses; here a mistake in a test's parameters
            g = segment.global_batch
            if not self.weighted and segment.total < g:
                raise ValueError(f"N = {segment.total} < G = {g} at step {segment.begin}")
            if self.weighted and any(w > 0 and n < g for w, n in zip(segment.weights, segment.counts)):
                raise ValueError(f"a source of positive weight has fewer than G = {g} starts at step {segment.begin}")
        self.deal_key = random(seed, 0, 0, 3, 0)  # k
        self.permutations = {}

    @classmethod
    def fixed(cls, lengths, context, batch_size, world_size=1, seed=0, weights=None, documents=None,
              mixture="interleaved"):
        """A stream without a schedule: one entry (0, batch_size, context)."""
        return cls(lengths, [(0, batch_size, context)], world_size, seed, weights, documents, mixture)

    # --- sources -------------------------------------------------------------
    def counts(self, context):
        """N_j for context T: max(0, L_j - T) starts, or with documents the
        document starts d with d + T + 1 <= L_j (a prefix of the sorted starts)."""
        if self.documents is None:
            return [max(0, length - context) for length in self.lengths]
        return [bisect.bisect_right(starts, length - context - 1)
                for starts, length in zip(self.documents, self.lengths)]

    def start(self, source, x):
        """The start that place x of source `source` names: x, or D_j[x]."""
        return x if self.documents is None else self.documents[source][x]

    def locate(self, segment, x):
        """(source, start) of place x of the unweighted permutation: source j
        with C_j <= x < C_{j+1}, place x - C_j."""
        for source, (first, count) in enumerate(zip(segment.firsts, segment.counts)):
            if x < first + count:
                return source, self.start(source, x - first)
        raise AssertionError("x outside [0, N)")

    def permutation(self, n, epoch, stream):
        key = (n, epoch, stream)
        if key not in self.permutations:
            if len(self.permutations) > 4096:
                self.permutations.clear()
            self.permutations[key] = Permutation(self.seed, n, epoch, stream)
        return self.permutations[key]

    # --- segments and ordinals -------------------------------------------------
    def segment_at(self, step):
        return self.segments[bisect.bisect_right(self.begins, step) - 1]

    def ordinal(self, step, index):
        """n = O_m + (s - b_m) x G_m + i."""
        segment = self.segment_at(step)
        return segment.ordinal + (step - segment.begin) * segment.global_batch + index

    # --- unweighted: the cursor (e, p) ------------------------------------------
    @staticmethod
    def advance(epoch, place, total, global_batch, offset):
        """The cursor of the step `offset` steps into a segment that starts
        with cursor (epoch, place) (after its context rule): the steps left
        in that epoch, then N / G steps an epoch."""
        left = max(0, (total - place) // global_batch)
        if offset < left:
            return epoch, place + offset * global_batch
        offset -= left
        per_epoch = total // global_batch
        return epoch + 1 + offset // per_epoch, (offset % per_epoch) * global_batch

    def cursor(self, step):
        """(e, p) that step `step` draws from, in closed form per segment."""
        epoch, place, previous = 0, 0, None
        for segment in self.segments:
            if previous is not None and segment.context != previous.context and place > 0:
                epoch, place = epoch + 1, 0
            last = step if segment.end is None or step < segment.end else segment.end - 1
            epoch, place = self.advance(epoch, place, segment.total, segment.global_batch, last - segment.begin)
            if last == step:
                return epoch, place
            place += segment.global_batch
            previous = segment
        raise AssertionError("unreachable")

    def cursor_walk(self, step):
        """The same cursor by the guide's rules 1-3, one step at a time."""
        epoch, place = 0, 0
        for s in range(step + 1):
            index = bisect.bisect_right(self.begins, s) - 1
            segment = self.segments[index]
            # 1. a context change ends the epoch
            if index > 0 and s == segment.begin and segment.context != self.segments[index - 1].context \
                    and place > 0:
                epoch, place = epoch + 1, 0
            # 2. a step that does not fit ends it
            if place + segment.global_batch > segment.total:
                epoch, place = epoch + 1, 0
            if s == step:
                return epoch, place
            # 3. the step takes G places
            place += segment.global_batch
        raise AssertionError("unreachable")

    # --- weighted, interleaved: the deal and each source's cursor (e_j, p_j) -----
    def source_of(self, segment, ordinal):
        """The first source j with v_n < K_j."""
        value = (ordinal * GOLDEN + self.deal_key) % TWO64
        return next(j for j in range(len(self.lengths)) if value < segment.bounds[j + 1])

    def dealt(self, segment, source, first, count):
        """How many of the ordinals [first, first + count) of `segment` go to
        `source`: those with K_{j-1} <= v_n < K_j, counted in closed form."""
        return (dealt_below(self.deal_key, first, count, segment.bounds[source + 1])
                - dealt_below(self.deal_key, first, count, segment.bounds[source]))

    def source_cursor(self, source, ordinal):
        """(e_j, p_j) of source j before the sample of ordinal `ordinal`: per
        segment, the context rule, then the segment's samples before it that
        went to j (closed form)."""
        epoch, place, previous = 0, 0, None
        for segment in self.segments:
            if segment.ordinal > ordinal:
                break
            if previous is not None and segment.context != previous.context and place > 0:
                epoch, place = epoch + 1, 0
            end = segment.end_ordinal()
            last = ordinal if end is None else min(ordinal, end)
            taken = self.dealt(segment, source, segment.ordinal, last - segment.ordinal)
            if taken:
                count = segment.counts[source]
                epoch, place = epoch + (place + taken) // count, (place + taken) % count
            previous = segment
        return epoch, place

    # --- the windows ---------------------------------------------------------------
    def sample(self, step, index):
        """(source, start) of sample `index` of global step `step`."""
        segment = self.segment_at(step)
        g = segment.global_batch
        if not self.weighted:
            epoch, place = self.cursor(step)
            return self.locate(segment, self.permutation(segment.total, epoch, 0)(place + index))
        if self.mixture == "per_sample":
            u = (random(self.seed, step, index, 2, 0) >> 11) * 2.0**-53
            source = next(j for j, bound in enumerate(segment.cumulative) if u < bound)
            n = segment.counts[source]
            steps_per_epoch = n // g
            epoch = step // steps_per_epoch
            place = (step % steps_per_epoch) * g + index
            return source, self.start(source, self.permutation(n, epoch, source + 1)(place))
        ordinal = self.ordinal(step, index)
        source = self.source_of(segment, ordinal)
        epoch, place = self.source_cursor(source, ordinal)
        return source, self.start(source, self.permutation(segment.counts[source], epoch, source + 1)(place))

    def global_windows(self, step):
        """All G samples of a step, every rank's, in order."""
        return [self.sample(step, index) for index in range(self.segment_at(step).global_batch)]

    def windows(self, step, rank=0):
        """This rank's windows: samples r x B ... r x B + B - 1, with this step's B."""
        batch_size = self.segment_at(step).batch_size
        first = rank * batch_size
        return [self.sample(step, index) for index in range(first, first + batch_size)]

    def walk(self, steps):
        """The windows of global steps 0 ... steps - 1 (every rank's) and the
        cursors they drew from, by the guide's rules taken one sample at a
        time in ordinal order: the check of the closed forms. Returns
        (windows per step, cursor per step) where a cursor is (e, p) when
        unweighted, else the list of (e_j, p_j) before each sample."""
        if self.weighted and self.mixture == "per_sample":
            raise ValueError("the per_sample rule is a closed form already")
        drawn, cursors = [], []
        if not self.weighted:
            epoch, place = 0, 0
            for step in range(steps):
                index = bisect.bisect_right(self.begins, step) - 1
                segment = self.segments[index]
                if index > 0 and step == segment.begin and segment.context != self.segments[index - 1].context \
                        and place > 0:
                    epoch, place = epoch + 1, 0
                if place + segment.global_batch > segment.total:
                    epoch, place = epoch + 1, 0
                permutation = self.permutation(segment.total, epoch, 0)
                drawn.append([self.locate(segment, permutation(place + i)) for i in range(segment.global_batch)])
                cursors.append((epoch, place))
                place += segment.global_batch
            return drawn, cursors
        sources = len(self.lengths)
        state = [(0, 0)] * sources
        ordinal = 0  # counted here, not by the formula
        for step in range(steps):
            index = bisect.bisect_right(self.begins, step) - 1
            segment = self.segments[index]
            if index > 0 and step == segment.begin and segment.context != self.segments[index - 1].context:
                state = [(epoch + 1, 0) if place > 0 else (epoch, place) for epoch, place in state]
            row, row_cursors = [], []
            for _ in range(segment.global_batch):
                value = (ordinal * GOLDEN + self.deal_key) % TWO64
                source = 0
                while not value < segment.bounds[source + 1]:
                    source += 1
                epoch, place = state[source]
                row_cursors.append(list(state))
                x = self.permutation(segment.counts[source], epoch, source + 1)(place)
                row.append((source, self.start(source, x)))
                place += 1
                state[source] = (epoch + 1, 0) if place == segment.counts[source] else (epoch, place)
                ordinal += 1
            drawn.append(row)
            cursors.append(row_cursors)
        return drawn, cursors


def pieces(windows, documents, context, max_documents=0):
    """(cu_seqlens, position_ids, max_seqlen) of one device's windows, from
    the guide's definition: x's rows * T tokens, flattened, cut at every row
    start and at every document start inside a row; cu_seqlens padded to
    max_documents + 1 (0: rows * T + 1) by repeating the total. None when
    the pieces do not fit in max_documents."""
    ends, position_ids, offset = [], [], 0
    for source, start in windows:
        cuts = sorted(d for d in documents[source] if start < d < start + context) + [start + context]
        first, row = start, []
        for cut in cuts:
            row.extend(range(cut - first))
            ends.append(offset + cut - start)
            first = cut
        position_ids.append(row)
        offset += context
    limit = max_documents or offset
    if len(ends) > limit:
        return None
    lengths = [end - begin for begin, end in zip([0] + ends, ends)]
    return [0] + ends + [offset] * (limit - len(ends)), position_ids, max(lengths)


def bos_starts(tokens, marker):
    """A document starts at every marker."""
    return [int(index) for index in numpy.flatnonzero(numpy.asarray(tokens) == marker)]


def eos_starts(tokens, marker):
    """A document starts at 0 and after every marker."""
    after = [int(index) + 1 for index in numpy.flatnonzero(numpy.asarray(tokens) == marker)]
    return sorted({0, *[start for start in after if start < len(tokens)]})
