"""The hot paths before and after this release, in one run, as CPU time and floor ratios.

"before" is the last 0.4 commit: the parent of the commit that set ``0.5.0`` in
``src/dpcount/_version.py`` (found with ``git log -S``; the script checks that the
CHANGELOG's top section there is 0.4). (0.4 was measured against 0.3 the same way;
the figures below are that run's, kept as the record of 0.4.) Its ``src`` is
extracted with ``git archive`` into a temporary directory. "after" is a source tree
(``--after PATH``, default this script's repository).

Every measurement runs in a fresh subprocess with ``PYTHONPATH`` at one tree's
``src`` (the child checks which ``dpcount`` it imported). The rounds alternate the
order (before, after; after, before; ...), so a change in the machine's load hits
both alike. A child times each hot path as process CPU time (``time.process_time``:
time other jobs hold the core is not counted) interleaved with a floor of fixed
numpy work of the same size (drawing the same number of normals or Laplace samples,
or one FFT convolution), keeping the least of its repeats; the hot path ÷ floor ratio
from the same child cancels most of the remaining load (cache and memory-bandwidth
contention, frequency). The floors are identical code in both trees, so their
after/before ratio (printed) shows how evenly the load fell. The BLT floors draw into
a kept array (``standard_normal(out=...)``, since 2026-12-07): a fresh array's page
faults depended on the heap the hot path had left (its floors came out 0.90-0.93
after/before once the after release faulted less), so its ratio hid that change.

Hot paths (issue 19: "trees batch and update, sqrt, BLT step, keyed floor ratio,
cascade"):

* ``BinaryTree`` and ``KaryTree(k=19, subtract=True)``: batch ``release`` at
  T = 10^6 (floor: T numpy Laplace samples) and ``stream().update(1.0)`` ×2·10^4
  (floor: as many scalar ``rng.laplace`` calls);
* ``SqrtFactorization``: batch ``release`` at T = 2^16 (floor: one real-FFT
  convolution of two length-T arrays) and ``stream().update`` ×2^16 (floor: as many
  scalar ``rng.standard_normal`` calls);
* BLT (shipped 8 buffers for T = 4096): one noise-process step at d = 10^5 (floor:
  d normals) and ``CountingStream.update`` of a d-vector; batch ``release`` at
  T = 10^7 (``--quick``: 10^6; floor: T normals) of zeros and (since 2026-12-07) of
  0/1 steps (since 0.5 a block of zero steps takes a shorter path, so the zeros row
  alone no longer shows data with events);
* keyed embedded run, 2·10^4 keys × 200 steps (``--quick``: 10^4 keys), 10 events
  per key, binary tree without subtraction, discrete Laplace, ε = 1: the whole run
  against the floor of K·T numpy Laplace samples, and against the version's own PRF
  floor (as ``bench_keyed.py`` at that version measures it: 0.3 drew every tree node
  of every key, 0.4 the rows its noise process draws);
* Cascade Sampling (``cascade_sample``) at n = 2^22 (``--quick``: 2^21; floor: n normals).

Printed per hot path: the least and the median over rounds of the CPU seconds per
call, before and after; after ÷ before of the least; each version's median hot ÷
floor ratio and their after ÷ before. A path is flagged when the floor-normalized
after ÷ before exceeds 1.05 and the least-CPU after ÷ before does too ("SLOWER"), or
only one of them ("check").

Measured 2026-11-27 12:45-12:58 UTC on the 2-core development machine shared with ~8
engineers' jobs (load average 11-15 throughout: wall time was 4x the CPU time, so only
the same-run ratios count), ``python benchmarks/bench_before_after.py`` (full sizes, 4
rounds, 12.3 min wall, 3.1 min CPU), before = ec49881, after = a096372's source. CPU
per call, least over rounds; "÷ floor": median over rounds of hot ÷ floor in the same
child; last column: after ÷ before of those ratios:

===================================  =========  =========  =====  =======  =======  =====
hot path                             before     after      A÷B    B÷floor  A÷floor  A÷B
===================================  =========  =========  =====  =======  =======  =====
BinaryTree batch T = 10^6            41.27 ms   38.71 ms   0.938  1.916    1.738    0.907
BinaryTree update (per call)         1.68 µs    1.67 µs    0.992  2.388    2.403    1.007
KaryTree k=19 batch T = 10^6         37.91 ms   34.75 ms   0.916  1.731    1.726    0.997
KaryTree k=19 update (per call)      1.47 µs    1.51 µs    1.023  2.122    2.109    0.994
SqrtFactorization batch T = 2^16     12.84 ms   13.52 ms   1.053  1.184    1.306    1.103
SqrtFactorization update (per call)  0.57 µs    0.56 µs    0.989  1.177    1.160    0.985
BLT noise step d = 10^5              2.72 ms    2.58 ms    0.949  2.452    2.232    0.911
BLT stream.update d = 10^5           3.61 ms    3.40 ms    0.941  3.021    2.745    0.909
BLT batch T = 10^7                   0.394 s    0.325 s    0.825  3.242    2.455    0.757
keyed 2·10^4 keys × 200 steps        0.745 s    0.376 s    0.505  9.764    4.402    0.451
keyed ÷ its own PRF floor            0.484 s    0.175 s           1.434    1.957    1.365
cascade_sample n = 2^22              85.68 ms   82.54 ms   0.963  1.533    1.462    0.954
===================================  =========  =========  =====  =======  =======  =====

(keyed ÷ its own PRF floor: the before/after columns are the floors; the run's time
beyond its floor fell from 0.251 s to 0.190 s, median.) An earlier full run (load 12-16)
gave the same picture: sqrt batch 0.971 (least) and 1.080 (÷ floor), BinaryTree update
1.015 and 1.055, BLT noise step 1.077 and 0.990, every other path ≤ 1.03 on both.

* The square root's batch release at T = 2^16 is the one path above 1.05 on both
  measures here. Cause: ``add_running_sums`` (``counting/_steps.py``, commit 41ef092),
  which adds the running sums in int64 blocks of 2^16 values: at T = 10^6 it is faster
  (BinaryTree release 0.943x, median of 6 in-process A/B pairs), but at T = 2^16 the
  array is one block and its extra passes (int64 copy, equality check, int64 cumsum,
  min/max) cost more than numpy's cumsum + check + add: the release takes 1.044x
  (median of 6 pairs, range 1.00-1.15) with it than with 0.3's three lines. The rest
  of the release (mostly the FFT convolution) is 0.3's code. Possible fix (in
  counting/): keep 0.3's three-pass sum when the array is a single block.
* The keyed run takes half the CPU of 0.3's, but its ratio to its own PRF floor rose
  (1.43 → 1.96) because that floor shrank 2.8x (the stream process draws ~T samples per
  key instead of every tree node, and the one-log sampler is faster); the run's time
  beyond the floor did not grow.
* BinaryTree update: the per-step code is 0.3's except ``NoiseBuffer.take_one``'s copy
  test for vector rows (commit 4eaec65), measured 1.018x in process (median of 8 A/B
  pairs, within ±4 %).
* BLT noise step: the fused column-block step (issue 20) is 0.936x the unfused 0.3
  step in process (median of 8 A/B pairs).

0.5, float-safe releases (issue 33, "speed"): measured 2026-12-06 20:24-20:27 UTC, load
average 18-25 on the 2 shared cores, ``--quick --only tree sqrt blt_batch --rounds 3``,
before = b24b7db, after = the speed branch at 51cc3ea (A÷B of the least
CPU, then of the median floor ratio): BinaryTree batch 1.024 / 1.089, update 1.383 / 1.400;
KaryTree k=19 batch 0.867 / 0.972, update 1.497 / 1.556; sqrt batch T = 2^16 1.107 / 1.086,
update 2.015 / 2.031; BLT batch T = 10^6 1.112 / 1.105 (the same branch before this work:
1.61-1.69 batch, 2.7-6.0 update); at c2071cc (20:39, load 13-15, ``--only blt_step``):
BLT noise step d = 10^5 1.007 / 1.004, BLT stream.update d = 10^5 1.208 / 1.207 (1.84
before the vector snap kept its scratch). What is left is the snap itself: ~10 elementwise passes
per batch value (``snap_release``'s scaled form, no ``fmod``, which cost 25-75 ns a value)
and, per stream update, one ``fmod``, a division, two additions and a multiplication in
Python floats (``snap_scalar``) where 0.4 made one addition.

Then (issue 33, "speed2"): measured 2026-12-06 23:13-23:15 UTC, load average 11-12,
``--quick --only tree sqrt blt_step blt_batch --rounds 4``, before = b24b7db, after =
be59ac7 (A÷B of the least CPU / of the median floor ratio): BinaryTree update 1.029 /
1.023, KaryTree update 0.930 / 0.919, sqrt update 1.226 / 1.237; BinaryTree batch 1.126 /
1.210, KaryTree batch 0.884 / 0.959, sqrt batch 1.102 / 1.083, BLT batch T = 10^6 1.109 /
1.088; BLT noise step 1.011 / 1.045, BLT stream.update d = 10^5 1.099 / 1.148. Against
the branch point 5965e39 in one run (``--before 5965e39``, 23:15-23:16, load 12-18):
updates 0.73 (BinaryTree), 0.66 (KaryTree), 0.55 (sqrt), 0.88 (BLT vector); batches
0.99-1.09, where in-process A/B pairs of BinaryTree's batch (4 × 15 releases each)
give 25.55 ms (main) and 25.8 ms (this): the same code, the spread is the machine's.
The stream update now takes a fast path (snap_scalar written out, the grids read from
blocks of variances instead of one Python float per step, the square root's noise
popped from its hand-out list); what stays is the scalar snap's arithmetic, ~0.1 µs
per step: the square root's 0.4 update costs 0.35 µs, two thirds of it its amortized
FFT, so the snap alone is +20-25 % there. The batch and vector snaps multiply by
1/g (exact) and skip the sign copy when every sum is positive; they still make ~9
elementwise passes (BLT vector step: one fresh output array as well).

Then (issue 33, "hotpath"): measured 2026-12-07 02:26-02:29 UTC, load average 9.6-11.8
on the 2 shared cores, ``--quick --rounds 4`` (every group), before = b24b7db, after =
0ade9fb (A÷B of the least CPU / of the median floor ratio): BinaryTree batch 0.886 /
0.960, update 1.006 / 1.006; KaryTree batch 0.854 / 0.943, update 0.834 / 0.828; sqrt
batch 0.859 / 0.819, update 1.020 / 1.032; BLT noise step 1.010 / 1.038, stream.update
d = 10^5 1.061 / 1.137; BLT batch T = 10^6 1.076 / 1.107; keyed 0.875 / 0.866; cascade
0.979 / 0.988. What changed: the scalar stream takes its grids a run at a time
(``StepGrids.run``: one comparison per step instead of an iterator's ``next``) with
literal constants; the square root keeps its kernel's spectra per block size and the
BLT its chunk matrices (per mechanism: computed once for every stream and release); a
vector step sums into a spare array, checks it by its least and largest sums and snaps
into the BLT's fresh noise; the batch snap converts integer sums to float64 in a pass
of its own (mixed int64·float64 ufuncs cost 2-5x a float pass) and adds q in one pass
when every sum is at least its grid; the binary tree's batch level adds z + P at once
and draws before allocating (a release at T = 10^6 faulted ~2300 fresh 4 KiB pages in
this script's child, now ~300). Page faults decide much of the batch rows: the same
run with ``--pinned-heap`` (glibc keeps freed memory in both children, 02:28-02:29,
load 9.6-10.5; the trees, square root and BLT groups) gives the code alone: BinaryTree
batch 1.158 / 1.191, KaryTree batch 1.189 / 1.214 (0.4 faulted there, 0.5 does not:
without the faults the snap's ~9 elementwise passes, ~2 ns a value, show), sqrt batch
0.814 / 0.801, sqrt update 1.018 / 1.068, BLT noise step 1.045 / 1.069, BLT
stream.update 1.012 / 1.060, BLT batch 1.060 / 1.075. Every release is bit-identical
to e54fda8's (the branch point) for a fixed seed (sha256 of the releases of 3 seeds at
these shapes and of mixed update / update_many sequences).

Then (issue 33, "snap"): the BLT vector stream adds and snaps its sums column block by
column block inside the fused noise step (``BLTNoiseProcess.next_finished``,
``float_safe.snap_in_blocks``: the snap's passes run on cached blocks), checks the sums
by bounds carried from step to step before drawing (one least / largest of x instead of
a pass writing the sums and two reductions over them), and skips
``check_stream_step``'s generic checks for a float64 vector; a snapped single-block
batch sums in int64 (numpy's float64 cumsum is a ~3 ns/value loop); the BLT process
keeps its decays and ratios with the chunk matrices. Measured 2026-12-07 05:11-05:16
UTC, load average 5.2-7.3 on the 2 shared cores, ``--quick --rounds 8 --only blt_step
blt_batch`` (A÷B of the least CPU / of the median floor ratio): against 0.4 (b24b7db)
BLT stream.update d = 10^5 1.043 / 1.069, BLT batch T = 10^6 1.032 / 1.039, noise
step 0.995 / 1.008 (identical code: the run's noise is a few %); with
``--pinned-heap`` 1.175 / 1.095, 1.063 / 1.071, 1.049 / 0.992; other runs of the same
hour gave the stream 0.967-1.072 / 1.006-1.082 and the batch 1.012-1.096 / 0.992-1.100.
Against this branch's start (``--before ff3796c``, same hour): stream.update 0.915 /
0.927 (pinned 0.995 / 0.963), batch 0.994 / 0.980. What is left against 0.4 is the
snap's arithmetic, ~8 elementwise passes per value (scaled form, every operation exact,
so none can be dropped without changing a released bit) where 0.4 made one addition:
~0.12 ms per d = 10^5 update in cache, ~1.5 ms per 10^6 batch values. Every release is
bit-identical to ff3796c's (``benchmarks/release_digests.py``: 459 sha256 digests of 3
seeds, BLT batch at T = 1000 ... 10^6, vector streams at d = 3, 1000, 100003, scalar
streams, sqrt and trees, direct snaps on edge values).

Then (issue 33, "hot3"): the fused vector step takes ⌈d / 65536⌉ column blocks of
equal width (d = 10^5: 2 blocks, not 7 with a short last one: each block costs ~18 µs
of Python and ufunc calls); a batch of at least 2^18 values computes its noise in the
array of its draws (``BLTNoiseProcess._compute_new``: one array of T·d values allocated
and page-faulted instead of two), E = rows·Pᵀ transposed block by block and the
filters run while it is in cache. Every product keeps ``_rows_times``' row blocks: with a 32-step
inner dimension OpenBLAS's rounding depends on a call's row count (a first try with
768-row blocks changed bits of one seed's 2^20-step noise). Releases bit-identical to
8e0ae19 (main): ``release_digests.py`` (459 digests) and 114 more (BLT batches at d =
2, 4 up to 2^20, scalar ones at odd horizons, ``next_many`` / ``next`` sequences, vector
streams at d = 7, 32769, 70001). Measured 2026-12-07 07:53-07:59 UTC, load average
1.8-2.1 on the 2 shared cores, ``--quick --rounds 8`` (A÷B of the least CPU / of the
median floor ratio), against 0.4 (b24b7db), ``--only blt_step blt_batch``: BLT noise
step d = 10^5 0.974 / 0.977 and 0.977 / 0.973, stream.update 1.016 / 1.010 and 1.016 /
1.018 (4 blocks; 2 blocks, 07:55-08:04: 0.998 / 0.995, 1.003 / 0.995, 0.993 / 0.987),
batch T = 10^6 0.921 / 0.904 and 0.928 / 0.926; ``--pinned-heap``: step 0.976 /
0.974, stream 1.005 / 0.988, batch 1.087 / 1.080. Against main (8e0ae19): step 0.968
/ 0.967, stream 0.971 / 0.966, batch 0.879 / 0.870. Every group in one child (after =
bb61bd6, 07:58-07:59): step 0.954 / 0.959, stream 1.015 / 1.015, batch 1.101 / 1.092
(flagged): after the tree group 0.4's release no longer faults (17.8 ms, 20.6 ms
alone), so only the computation is compared, and 0.5 computes more: the snap's ~10
elementwise passes per value (~1.5 ms per 10^6 values, ``add_running_sums`` and
``snap_release``) and the compensated decays' second filter (~0.3 ms); this branch
against main in that mode: 1.008 / 1.000.

Then (issue 33, "fuse"): stages of the BLT batch release at T = 10^6 (process CPU, least
of 15, 08:27-08:30 UTC, load average 1.5-2.3): T normals into a kept array 9.3 ms; the
release 19.2 ms (zeros) and 19.4 ms (0/1 steps), of which the noise 14.6-14.8 ms (drawing
~10.4, the filters 1.7, the three products 3.2) and ``add_running_sums`` with the snap
4.3-4.4 ms (without a grid 2.7 ms); 0.4's noise computes in about the same time, so the
gap is the snap. Every elementwise pass costs ~0.15-0.3 ms per 10^6 values whatever the
block (2^13 to 2^20 values alike: the passes are compute-bound and the 8 MB arrays fit
the 32 MB L3), so running the snap inside the noise's blocks saves nothing measurable;
only fewer passes do. Changed: a block of equal int64 sums under one grid is snapped
as one broadcast sum (4-5 full passes instead of 10), and a block of zero steps after a
whole sum is neither summed nor checked again (every sum is the one before). Zeros:
``add_running_sums`` 4.5 → 1.7 ms. Data with events in every block (0/1, 1 % sparse)
are unchanged: in subprocesses with glibc's heap kept (no page faults, 3 alternating
rounds, 08:41, load 4.3-4.5) 0.4 / trial / this: 0/1 18.2-18.6 / 19.5-20.0 / 19.8-20.1
ms, zeros 18.0-18.5 / 19.7-20.0 / 16.8-17.3 ms. Measured 08:40-08:41 UTC, load average
4.3-4.9, against 0.4 (b24b7db), after = 0392af4 (A÷B of the least CPU / of the median
floor ratio): ``--quick --rounds 4`` (every group in one child): BLT batch 0.952 /
0.984 (the trial branch at 5858316 in the same hour: 1.111 / 1.081), every other row
≤ 1.021 / 1.019; ``--quick --rounds 8 --only blt_batch``: 0.741 / 0.742. Releases
bit-identical to 5858316: ``release_digests.py`` 459 of 459, ``bench_scaled_batch.py
--digests`` 588 of 588. This benchmark releases zeros only, so its BLT batch row now
shows the zero-block path; on data with events the release stays ~1.07-1.09x 0.4.

Then (issue 33, "pinsnap"): the batch release's whole-number blocks take fewer and
cheaper passes, the same floats. ``release`` validates the steps by their least and
largest value (two reductions, which also prove them finite) and hands these bounds to
``add_running_sums``: steps within ±2^51 become int64 by the rounder 1.5·2^52 (x + M,
its bits − bits(M), and (x + M) − M == x as the whole-number check: four float passes
where a float→int64 ``copyto`` and a mixed int64 == float64 comparison cost ~2.5x);
when no step is negative and |c| + m·max|x| < 2^53 the sums need no reductions (the
first and last rows are the least and largest); under one grid with every sum below
2^50 the int64 sums start from the bits of C = 1.5·2^52/g, so their bits are those of
C + S/g (``float_safe.sum_offset`` / ``snap_offset_sums``: one float subtraction instead
of the int64→float64 pass and the ·1/g, u and q in the steps' float scratch and the
consumed int64 sums); blocks of 2^17 values; a grid run kept across blocks. Releases
bit-identical to main (e47fe97): ``release_digests.py`` 459 of 459,
``bench_scaled_batch.py --digests`` 588 of 588, ``sqrt_stream_digests.py`` 726 of 726.
Measured 2026-12-07 10:34-10:37 UTC, load average 1.0-3.2 on the 2 shared cores,
``--quick --rounds 4`` (every group in one child), against 0.4 (b24b7db), after =
754b308 (A÷B of the least CPU / of the median floor ratio): BLT batch T = 10^6 of 0/1
steps 0.831 / 0.821 and 0.888 / 0.848 (main e47fe97, 09:51-09:54: 0.892 / 0.882, 0.908 /
0.881), zeros 0.968 / 0.956, 0.958 / 0.953; ``--pinned-heap``: 0/1 steps 1.020 / 1.040
and 0.982 / 1.000 (main: 1.088 / 1.095, 1.088 / 1.112), zeros 0.956 / 0.962, 0.894 /
0.900 (main: 0.962 / 0.961, 0.960 / 0.963); four more pinned runs of this branch
(10:13-10:31) gave 0/1 steps 1.018-1.058 / 1.021-1.040. The trees' batches under
``--pinned-heap`` stay flagged (BinaryTree 1.058-1.103 / 1.099-1.103, KaryTree 1.135-
1.156 / 1.118-1.146; main: 1.142 / 1.155-1.165, 1.179-1.208 / 1.188-1.235): their grids
change nearly every step, so their snap divides by an array of grids (no single-grid
offset form). Out of this branch's files: the BLT noise itself computes ~0.3-0.7 ms
more than 0.4's at 10^6 (the compensated decays' second filter).

Then (issue 33, "treesnap"): the trees' batch releases. A tree's grid changes every few
steps (at T = 10^6: 23,276 changes among 3 grids for BinaryTree, 61,167 among 4 for
KaryTree k=19), so each block had its grids rebuilt by ``np.repeat`` from the table's
runs, two reductions over them, the int64 sums converted to float64 and both the sums
and the noise divided by the per-step grids. Now (``_steps._BlockSums._per_step_block``)
a ``GridTable`` whose runs are short keeps 1/g of every step (``step_inverses``, 8 bytes
a step, up to 2^22 steps; exact for powers of two): the whole steps' int64 sums start
from bits(1.5·2^52), so one scalar float subtraction gives S exactly (``sum_offset`` with
g = 1, |S| < 2^50), and ``float_safe.snap_quotients`` multiplies S and the noise by 1/g
and divides the result by it (x·(1/g), x/(1/g) are the correctly rounded x/g, x·g: the
same floats as ``snap_release``); per-step arrays of the offsets C_t = 1.5·2^52/g_t
(24 bytes a step) were tried first and cost ~0.8 ms of memory traffic at 10^6 (the same
code with cache-resident arrays: 4.2 → 3.4 ms). ``TreeNoiseProcess.next_many``'s
general levels (the k-ary tree) run in chunks of ~4096·19 node values, and add the
parents' noise by one addition over the chunk after setting digit 0's column to 0
(0 + P is P + 0, bit for bit) instead of three strided ones (148 → 39 µs a chunk of 4096
rows). Releases bit-identical to ``trial`` (21e560f, this branch's base):
``release_digests.py`` 459 of 459, ``bench_scaled_batch.py --digests`` 588 of 588,
``sqrt_stream_digests.py`` 726 of 726, and 384 + 24 digests of tree batch releases
(binary, k = 19 with subtraction, k = 4; Laplace and Gaussian; T = 1000 … 10^6; 0/1,
signed, fractional, near-2^52, partial and vector steps) and streams (``update_many``
across parents). Measured 2026-12-07 11:04-11:06 UTC, load average 1.5-1.9 on the 2
shared cores, ``--quick --rounds 4 --only tree``, against 0.4 (b24b7db), this branch at
44a80d6 and ``trial`` (21e560f) in alternate runs (A÷B of the least CPU / of the median
floor ratio): ``--pinned-heap``: BinaryTree batch 1.042 / 1.040 and 1.042 / 1.012
(trial 1.108 / 1.092, 1.134 / 1.115), KaryTree batch 1.014 / 0.991 and 0.986 / 0.976
(trial 1.137 / 1.159, 1.146 / 1.133); default: BinaryTree 0.766 / 0.822 and 0.787 /
0.830 (trial 0.791 / 0.879, 0.826 / 0.875), KaryTree 0.741 / 0.790 and 0.719 / 0.772
(trial 0.828 / 0.922, 0.830 / 0.921). In-process (pinned heap, least of 15):
``add_running_sums`` under the grids 4.57 → 3.94 ms (BinaryTree) and 4.65 → 3.75 ms
(KaryTree); without grids 2.1-2.2 ms. The BLT batch at T = 10^7 (full sizes,
``--only blt_batch``, default heap; this change leaves it: its grids change rarely),
11:07-11:08 UTC, load 1.4-1.7, 4 rounds: zeros 0.938 / 0.933, 0/1 steps 1.049 / 1.028
(at bedf367, 10:54-10:55, 2 rounds: 0.949 / 0.919 and 1.037 / 1.014). Every group,
``--quick --rounds 4``, default heap, 11:12 UTC at 8ad2a61: no path flagged (trees'
batches 0.744 / 0.789 and 0.732 / 0.766, BLT batch 0/1 steps 0.832 / 0.852).

Then (issue 33, "pinheap"): what 0.5 computes per batch value that 0.4 does not (the
trees at T = 10^6, 0/1 steps, in-process stages, pinned heap, each after a floor's 8 MB
draw): the snap, ~9 elementwise passes (S from the offset sums, S·(1/g), noise·(1/g),
trunc, lo/g, +, rint, +q, ÷(1/g); ``add_running_sums`` 5.5-6.1 ms against 0.4's 4.2-4.4,
whose int64 block sums took ~7 passes), against a tree noise ~1 ms faster than 0.4's
(13.8-14.5 against 14.9-16.0 ms for BinaryTree; KaryTree's ~2.5 ms faster absorbs the
snap). Every rewriting of the snap found keeps its pass count (per-step grids: one
pass saved costs a per-step array read) and the passes are compute-bound (blocks of
2^13 … 2^20 values, float32 1/g, chunked binary levels: no gain measured), so what
changed is the conversion: steps bounded in [0, 1] (0/1 data) become int64 by two
masks (x == 1, x == 0, counted; ``_steps._binary_as_int64``) instead of the rounder's
four float passes: 0.60 against 0.88 ns a value (2^17 values, least of 60), and
``add_running_sums`` 5.28 / 6.57 against 5.56 / 7.05 ms (BinaryTree, least / median of
40 interleaved, pinned heap, load ~5); the snap's 2 MiB scratch is allocated only when a
block needs it. Releases bit-identical to main (3d4e7fb): ``release_digests.py`` 459 of
459, ``bench_scaled_batch.py --digests`` 588 of 588, ``sqrt_stream_digests.py`` 726 of
726. Measured 2026-12-07 13:16-13:31 UTC on the 2 shared cores under load average 4.2-6.0
(other sessions' tests and benchmarks), ``--quick --rounds 8 --pinned-heap --only
blt_batch tree``, against 0.4 (b24b7db), A÷B of the least CPU / of the median floor
ratio: after = b4ae797's code, three runs (13:25-13:27, load 5.0-5.2; 13:27-13:29, load
5.1-5.6; 13:40-13:41 at 2727538, load 5.2-5.6): BLT batch of 0/1 steps 1.027 / 1.022,
1.034 / 1.044 and 0.970 / 1.030, BinaryTree batch 1.034 / 1.060, 1.036 / 1.103 and 1.046
/ 1.048, KaryTree 1.012 / 0.933, 0.955 / 0.961 and 0.964 / 0.967; before the masks (c89c69c,
13:16-13:20, load 4.2-6.0): BLT 0/1 1.036 / 0.958 and 1.087 / 1.092, BinaryTree 1.018 /
1.054 and 1.049 / 1.045, KaryTree 0.984 / 0.941 and 0.989 / 0.985. Against main
(``--before 3d4e7fb``, 13:29-13:31, load 5.5): BLT 0/1 0.947 / 0.966, BinaryTree 1.002 /
0.994, KaryTree 1.019 / 1.012, BLT zeros (the same code in both) 1.047 / 1.039: at this
load the runs spread by ±5 %, as much as the change. Not met: the BinaryTree batch stays
1.03-1.10 on the floor measure under the pinned heap (the snap's ~1.5 ms at 10^6 against
0.4's plain sum, half of it won back by the faster binary levels). Default heap, every
group, ``--quick --rounds 4`` (1802973, 13:32-13:33, load 4.9-5.4): BinaryTree batch
0.751 / 0.835, KaryTree 0.696 / 0.786, BLT batch 0/1 0.819 / 0.824, zeros 0.914 / 0.913,
every other row ≤ 1.036 on both but keyed 0.908 / 1.247 (its floors 0.947 apart; no
code of this change on its path; ``--only keyed``, 13:33-13:34: 0.946 / 0.962); at
c89c69c (13:20-13:22, load 4.8-6.1) BinaryTree update 1.063 / 1.034 (code unchanged;
other runs of the hour 0.982-1.036 / 0.957-1.017).

Usage: python benchmarks/bench_before_after.py [--after PATH] [--before REV] [--rounds N]
[--quick] [--only NAME ...] [--pinned-heap]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

HERE = Path(__file__).resolve()
GROUPS = ("tree", "sqrt", "blt_step", "blt_batch", "keyed", "cascade")
SLOWER = 1.05  # the limit: no hot path more than 5 % slower

# -- sizes (full, quick): each timed block takes ~20-100 ms of CPU, repeated ``reps``
# times interleaved with its floor; the least is kept --------------------------------
SIZES: dict[str, tuple[int, int]] = {
    "tree_T": (10**6, 10**6),
    "tree_updates": (2 * 10**4, 2 * 10**4),
    "sqrt_T": (2**16, 2**16),
    "blt_d": (10**5, 10**5),
    "blt_steps": (20, 20),
    "blt_batch_T": (10**7, 10**6),
    "keyed_keys": (2 * 10**4, 10**4),
    "keyed_steps": (200, 200),
    "keyed_reps": (3, 2),
    "cascade_n": (2**22, 2**21),
    "reps": (7, 5),
}


# ======================================================================================
# Child side: runs with PYTHONPATH at one tree's src and imports that tree's dpcount.
# ======================================================================================


def _cpu_pair(
    hot: Callable[[], object], floor: Callable[[], object], reps: int, inner: int = 1
) -> tuple[float, float]:
    """Least process CPU seconds per call of ``hot`` and of ``floor``, interleaved
    (floor, hot, floor, hot, ...), each timed over ``inner`` calls."""
    best_hot = best_floor = float("inf")
    for _ in range(reps):
        for fn, is_hot in ((floor, False), (hot, True)):
            start = time.process_time()
            for _ in range(inner):
                fn()
            cpu = (time.process_time() - start) / inner
            if is_hot:
                best_hot = min(best_hot, cpu)
            else:
                best_floor = min(best_floor, cpu)
    return best_hot, best_floor


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    import inspect

    params = inspect.signature(fn).parameters
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def build(factory: Callable[..., Any], *args: Any, privacy: dict[str, Any], **kw: Any) -> Any:
    """``factory(*args, budget=Budget(**privacy), **kw)``, or with the privacy fields as
    loose keywords where the version has no ``budget=`` (the one adapter per version)."""
    if _accepts(factory, "budget"):
        from dpcount.privacy import Budget

        return factory(*args, budget=Budget(**privacy), **kw)
    return factory(*args, **privacy, **kw)


def _tree_paths(quick: bool) -> list[dict[str, Any]]:
    import numpy as np

    from dpcount.counting import BinaryTree, KaryTree

    q = int(quick)
    T, n, reps = SIZES["tree_T"][q], SIZES["tree_updates"][q], SIZES["reps"][q]
    rng = np.random.default_rng(0)
    x = rng.integers(0, 2, size=T).astype(np.float64)
    out = []
    for label, mech in (
        ("BinaryTree", build(BinaryTree, T, privacy={"epsilon": 1.0}, rng=1)),
        ("KaryTree k=19", build(KaryTree, T, privacy={"epsilon": 1.0}, k=19, subtract=True, rng=1)),
    ):
        mech.release(x)  # warm-up

        def batch(m: Any = mech) -> None:
            m.release(x)

        hot, floor = _cpu_pair(batch, lambda: rng.laplace(0.0, 1.0, T), reps)
        out.append(_row(f"{label} batch T=10^{len(str(T)) - 1}", hot, floor, "T Laplace"))

        def updates(m: Any = mech) -> None:
            s = m.stream()
            for _ in range(n):
                s.update(1.0)

        def scalar_floor() -> None:
            for _ in range(n):
                rng.laplace(0.0, 1.0)

        hot, floor = _cpu_pair(updates, scalar_floor, reps)
        out.append(_row(f"{label} update ×{n:,}", hot / n, floor / n, "scalar Laplace calls"))
    return out


def _sqrt_paths(quick: bool) -> list[dict[str, Any]]:
    import numpy as np
    import scipy.fft as sfft

    from dpcount.counting import SqrtFactorization

    q = int(quick)
    T, reps = SIZES["sqrt_T"][q], SIZES["reps"][q]
    rng = np.random.default_rng(0)
    x = rng.integers(0, 2, size=T).astype(np.float64)
    a, b = rng.normal(size=T), rng.normal(size=T)
    n = sfft.next_fast_len(2 * T - 1, real=True)
    mech = build(SqrtFactorization, T, privacy={"epsilon": 1.0, "delta": 1e-6}, rng=1)
    mech.release(x)  # the first call also computes the coefficients
    hot, floor = _cpu_pair(
        lambda: mech.release(x),
        lambda: sfft.irfft(sfft.rfft(a, n) * sfft.rfft(b, n), n)[:T],
        reps,
        inner=5,
    )
    out = [_row(f"SqrtFactorization batch T=2^{T.bit_length() - 1}", hot, floor, "FFT conv")]
    values = x.tolist()

    def updates() -> None:
        s = mech.stream()
        for v in values:
            s.update(v)

    def scalar_floor() -> None:
        for _ in range(T):
            rng.standard_normal()

    hot, floor = _cpu_pair(updates, scalar_floor, reps)
    out.append(_row(f"SqrtFactorization update ×{T:,}", hot / T, floor / T, "scalar normals"))
    return out


def _blt_step_paths(quick: bool) -> list[dict[str, Any]]:
    import numpy as np

    from dpcount.counting import BLT

    q = int(quick)
    d, steps, reps = SIZES["blt_d"][q], SIZES["blt_steps"][q], SIZES["reps"][q]
    mech = build(BLT.optimized, 4096, privacy={"epsilon": 1.0, "delta": 1e-6}, rng=0)
    rng = np.random.default_rng(2)
    from dpcount.privacy import source

    if hasattr(source.NoiseSource, "generator"):  # 0.5: noise_process(source, width)
        words = source.NoiseSource.generator(mech.sampler, np.random.default_rng(1), d)
        process = mech.noise_process(words, d)
    else:
        process = mech.noise_process(mech.sampler, np.random.default_rng(1), d)
    process.next()

    def step() -> None:
        for _ in range(steps):
            process.next()

    drawn = np.empty(d)  # the floor draws into a kept array: no allocation (module docstring)

    def draws() -> None:
        for _ in range(steps):
            rng.standard_normal(out=drawn)

    hot, floor = _cpu_pair(step, draws, reps)
    out = [_row(f"BLT noise step d=10^{len(str(d)) - 1}", hot / steps, floor / steps, "d normals")]
    stream = mech.stream()
    ones = np.ones(d)

    def update() -> None:
        for _ in range(steps):
            stream.update(ones)

    hot, floor = _cpu_pair(update, draws, reps)
    out.append(
        _row(f"BLT stream.update d=10^{len(str(d)) - 1}", hot / steps, floor / steps, "d normals")
    )
    return out


def _blt_batch_paths(quick: bool) -> list[dict[str, Any]]:
    import numpy as np

    from dpcount.counting import BLT

    q = int(quick)
    T, reps = SIZES["blt_batch_T"][q], SIZES["reps"][q]
    mech = build(BLT.optimized, T, privacy={"epsilon": 1.0, "delta": 1e-6}, rng=0)
    zeros = np.zeros(T)
    rng = np.random.default_rng(3)
    mech.release(zeros)  # warm-up (lazy imports, buffers)
    drawn = np.empty(T)  # the floor draws into a kept array: no allocation (module docstring)
    hot, floor = _cpu_pair(
        lambda: mech.release(zeros), lambda: rng.standard_normal(out=drawn), reps
    )
    # 0/1 steps: an event in every block (zero blocks take a shorter path since 0.5)
    events = (np.random.default_rng(5).random(T) < 0.5).astype(np.float64)
    mech.release(events)
    hot01, floor01 = _cpu_pair(
        lambda: mech.release(events), lambda: rng.standard_normal(out=drawn), reps
    )
    name = f"BLT batch T=10^{len(str(T)) - 1}"
    return [
        _row(name, hot, floor, "T normals"),
        _row(f"{name}, 0/1 steps", hot01, floor01, "T normals"),
    ]


SECRET = b"benchmark-secret-not-for-use-000"


def _keyed_secret() -> Any:
    import dpcount.keyed.secret as secret

    testing = getattr(secret, "unsafe_testing_secret", None)
    return SECRET if testing is None else testing(SECRET)


def _keyed_job(n_keys: int, steps: int) -> Any:
    """The job keyed_counts builds (for the PRF floor), through this version's make_job."""
    import pandas as pd

    from dpcount.keyed.events import EventColumns, parse_times
    from dpcount.keyed.job import make_job

    if _accepts(make_job, "budget"):
        from dpcount.privacy import Budget

        privacy: dict[str, Any] = {"budget": Budget(epsilon=1.0, noise="discrete-laplace")}
    else:
        loose = {"epsilon": 1.0, "delta": None, "noise": "discrete-laplace"}
        privacy = {**loose, "calibration": None}
    job, _ = make_job(
        times=parse_times(pd.Series([0]), "t"),
        keys=list(range(n_keys)),
        columns=EventColumns("t", "key"),
        step=1,
        **privacy,
        max_weight=1,
        max_keys=None,
        start=0,
        horizon=steps,
        k=2,
        subtract=False,
        mechanism="tree",
    )
    try:  # the lifecycle moved to keyed/session.py (after 0.4)
        from dpcount.keyed.session import with_secret
    except ImportError:
        job, _ = job.with_secret(_keyed_secret())
    else:
        job, _ = with_secret(job, _keyed_secret())
    return job


def _prf_floor_03(job: Any, chunk: int) -> int:
    """0.3's floor (its bench_keyed.py): every tree node of every key, level by level."""
    from dpcount.keyed.engine import chunk_bounds

    m, samples = job.mechanism, 0
    for lo, hi in chunk_bounds(m.n_keys, chunk):
        noise = m.noise_fn(SECRET, lo, hi)
        for level in range(m.height):
            n_nodes = m.horizon // m.k**level
            if n_nodes:
                samples += noise(level, 0, n_nodes).size
    return samples


class _RowCounter:
    """A noise source of zeros that counts the rows a noise process draws."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.rows_drawn = 0

    def draw(self, sampler: Any, rows: int) -> Any:
        import numpy as np

        self.rows_drawn += rows
        integer = getattr(sampler, "integer", False)
        return np.zeros((rows, self.width), dtype=np.int64 if integer else np.float64)


def _prf_rows_04(job: Any) -> int:
    """Rows per key block the 0.4 noise process draws (a dry run with a zero source)."""
    from dpcount.keyed.engine import STEP_BLOCK
    from dpcount.privacy.rng import as_generator
    from dpcount.privacy.source import SourcedSampler

    m = job.mechanism
    c = m.counting
    counter = _RowCounter(m.key_block)
    process = c.noise_process(SourcedSampler(c.sampler, counter), as_generator(None), m.key_block)
    for t in range(0, m.horizon, STEP_BLOCK):
        process.next_many(min(STEP_BLOCK, m.horizon - t))
    return counter.rows_drawn


def _prf_rows_05(job: Any) -> int:
    """Rows per key block the 0.5 noise process draws (a dry run on zeros)."""
    from dpcount.keyed.engine import STEP_BLOCK
    from dpcount.privacy.source import NoiseSource

    m = job.mechanism
    counter = NoiseSource(m.counting.sampler, None, m.key_block)
    process = m.counting.noise_process(counter, m.key_block)
    for t in range(0, m.horizon, STEP_BLOCK):
        process.next_many(min(STEP_BLOCK, m.horizon - t))
    return int(counter.rows_drawn)


def _prf_floor_05(job: Any, rows: int) -> int:
    """0.5's floor (its bench_keyed.py): the PRF rows its noise process draws."""
    from dpcount.keyed.prf import PositionPRF, PRFWords
    from dpcount.privacy.source import NoiseSource

    m, samples = job.mechanism, 0
    prf = PositionPRF(SECRET, f"stream/{m.noise}", m.key_block)
    for lo in range(0, m.n_keys, m.key_block):
        words = PRFWords(prf, lo, lo + m.key_block)
        source = NoiseSource(m.counting.sampler, words, m.key_block)
        samples += source.sample((rows, m.key_block)).size
    return samples


def _prf_floor_04(job: Any, rows: int) -> int:
    """0.4's floor (its bench_keyed.py): the PRF rows its noise process draws."""
    from dpcount.keyed.prf import PositionPRF, PRFSource

    m, samples = job.mechanism, 0
    prf = PositionPRF(SECRET, f"stream/{m.noise}", m.key_block)
    for lo in range(0, m.n_keys, m.key_block):
        samples += PRFSource(prf, lo, lo + m.key_block).draw(m.counting.sampler, rows).size
    return samples


def _keyed_paths(quick: bool) -> list[dict[str, Any]]:
    import numpy as np
    import pandas as pd

    import dpcount.keyed.prf as prf
    from dpcount.keyed.run import keyed_counts

    q = int(quick)
    K, T, reps = SIZES["keyed_keys"][q], SIZES["keyed_steps"][q], SIZES["keyed_reps"][q]
    chunk = 2048
    rng = np.random.default_rng(0)
    events = pd.DataFrame({"t": rng.integers(0, T, 10 * K), "key": rng.integers(0, K, 10 * K)})
    kw: dict[str, Any] = dict(
        keys=range(K),
        time_column="t",
        key_column="key",
        step=1,
        start=0,
        horizon=T,
        secret=_keyed_secret(),
        chunk_keys=chunk,
        mechanism="tree",
        k=2,
        subtract=False,
        on_chunk=lambda lo, values: None,
    )
    try:  # 0.5: from_keywords takes the budget as budget= only
        from dpcount.keyed.spec import from_keywords as _groups  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        _groups = None
    if _accepts(keyed_counts, "budget") or _groups is not None:
        from dpcount.privacy import Budget

        kw["budget"] = Budget(epsilon=1.0, noise=cast(Any, "discrete-laplace"))
    else:
        kw.update(epsilon=1.0, noise="discrete-laplace")
    job = _keyed_job(K, T)
    if hasattr(prf, "PRFWords"):
        rows = _prf_rows_05(job)
        prf_floor: Callable[[], object] = lambda: _prf_floor_05(job, rows)  # noqa: E731
    elif hasattr(prf, "PRFSource"):
        rows = _prf_rows_04(job)
        prf_floor = lambda: _prf_floor_04(job, rows)  # noqa: E731
    else:
        prf_floor = lambda: _prf_floor_03(job, chunk)  # noqa: E731
    try:  # 0.5: the option groups, from the keywords above
        from dpcount.keyed.spec import from_keywords  # type: ignore[import-not-found,unused-ignore]

        kw = from_keywords(**kw)
    except ImportError:  # 0.4 and before: the keywords themselves
        pass
    keyed_counts(events, **kw)  # warm-up
    best_hot = best_floor = best_prf = float("inf")
    for _ in range(reps):
        start = time.process_time()
        rng.laplace(0.0, 1.0, K * T)
        best_floor = min(best_floor, time.process_time() - start)
        start = time.process_time()
        samples = prf_floor()
        best_prf = min(best_prf, time.process_time() - start)
        start = time.process_time()
        keyed_counts(events, **kw)
        best_hot = min(best_hot, time.process_time() - start)
    row = _row(f"keyed embedded {K:,} keys × {T}", best_hot, best_floor, "K·T Laplace")
    row.update(prf_floor=best_prf, prf_samples=samples)
    return [row]


def _cascade_paths(quick: bool) -> list[dict[str, Any]]:
    import numpy as np

    from dpcount.ranges import cascade_sample

    q = int(quick)
    n, reps = SIZES["cascade_n"][q], SIZES["reps"][q]
    rng = np.random.default_rng(0)
    cascade_sample(n, 1.0, rng)
    hot, floor = _cpu_pair(
        lambda: cascade_sample(n, 1.0, rng), lambda: rng.standard_normal(n), reps
    )
    return [_row(f"cascade_sample n=2^{n.bit_length() - 1}", hot, floor, "n normals")]


def _row(path: str, hot: float, floor: float, floor_name: str) -> dict[str, Any]:
    return {"path": path, "cpu": hot, "floor": floor, "floor_name": floor_name}


CHILD: dict[str, Callable[[bool], list[dict[str, Any]]]] = {
    "tree": _tree_paths,
    "sqrt": _sqrt_paths,
    "blt_step": _blt_step_paths,
    "blt_batch": _blt_batch_paths,
    "keyed": _keyed_paths,
    "cascade": _cascade_paths,
}


def child(groups: list[str], quick: bool, expect: str) -> None:
    """Measure ``groups`` with the dpcount found on the path (which must be under
    ``expect``) and print the rows as one JSON line."""
    import warnings

    warnings.simplefilter("ignore", DeprecationWarning)
    import dpcount

    where = Path(dpcount.__file__).resolve()
    if not where.is_relative_to(Path(expect).resolve()):
        raise SystemExit(f"imported dpcount from {where}, expected under {expect}")
    print(json.dumps([row for group in groups for row in CHILD[group](quick)]))


# ======================================================================================
# Parent side: finds the trees, alternates the children, prints the table.
# ======================================================================================


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def before_commit(repo: Path) -> str:
    """The parent of the oldest commit that put 0.5.0 into _version.py (the last 0.4 one)."""
    hits = _git(repo, "log", "--format=%h", "-S0.5.0", "--", "src/dpcount/_version.py").split()
    if not hits:
        raise SystemExit(f"no commit sets 0.5.0 in {repo}/src/dpcount/_version.py")
    parent = _git(repo, "rev-parse", "--short", f"{hits[-1]}^")
    changelog = _git(repo, "show", f"{parent}:CHANGELOG.md")
    heading = next(line for line in changelog.splitlines() if line.startswith("## "))
    if not heading.startswith("## 0.4"):
        raise SystemExit(f"{parent} is not a 0.4 commit: its CHANGELOG starts {heading!r}")
    return parent


#: ``--pinned-heap``: glibc keeps freed memory (no mmap'd arrays, no trimming), so no
#: release faults fresh pages after its first; both versions alike
PINNED_HEAP = {
    "MALLOC_MMAP_THRESHOLD_": str(1 << 30),
    "MALLOC_TRIM_THRESHOLD_": str(1 << 32),
    "MALLOC_TOP_PAD_": str(1 << 26),
}


def child_env(src: Path, pinned_heap: bool = False) -> dict[str, str]:
    """A child's environment: ``src`` on the path, single-threaded numerics, and with
    ``pinned_heap`` glibc's thresholds of :data:`PINNED_HEAP`."""
    env = dict(os.environ, PYTHONPATH=str(src))
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"  # the same single-threaded numerics in both trees
    if pinned_heap:
        env.update(PINNED_HEAP)
    return env


def run_child(
    src: Path, groups: list[str], quick: bool, pinned_heap: bool = False
) -> list[dict[str, Any]]:
    env = child_env(src, pinned_heap)
    cmd = [sys.executable, str(HERE), "--child", *groups, "--expect", str(src)]
    done = subprocess.run(
        cmd + (["--quick"] if quick else []), env=env, capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"child {groups} for {src} failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def _seconds(s: float) -> str:
    if s >= 0.1:
        return f"{s:.3f} s"
    if s >= 1e-4:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.2f} µs"


def report(results: dict[str, dict[str, list[dict[str, Any]]]]) -> list[str]:
    """One line per hot path: CPU min and median before/after, after ÷ before of the
    least, each version's median hot ÷ floor and their after ÷ before, the floors'
    after ÷ before, and a flag."""
    header = (
        f"{'hot path':<36}{'before min/med':>22}{'after min/med':>22}{'A÷B min':>9}"
        f"{'B÷floor':>9}{'A÷floor':>9}{'A÷B fl.':>9}{'floors':>8}  flag"
    )
    lines = [header, "-" * len(header)]
    for path, runs in results.items():
        b, a = runs["before"], runs["after"]
        bmin, amin = min(r["cpu"] for r in b), min(r["cpu"] for r in a)
        bmed = statistics.median(r["cpu"] for r in b)
        amed = statistics.median(r["cpu"] for r in a)
        bnorm = statistics.median(r["cpu"] / r["floor"] for r in b)
        anorm = statistics.median(r["cpu"] / r["floor"] for r in a)
        floors = min(r["floor"] for r in a) / min(r["floor"] for r in b)
        by_min, by_floor = amin / bmin, anorm / bnorm
        flag = (
            "SLOWER"
            if by_min > SLOWER and by_floor > SLOWER
            else "check"
            if by_min > SLOWER or by_floor > SLOWER
            else ""
        )
        lines.append(
            f"{path:<36}{_seconds(bmin) + ' / ' + _seconds(bmed):>22}"
            f"{_seconds(amin) + ' / ' + _seconds(amed):>22}{by_min:>9.3f}"
            f"{bnorm:>9.3f}{anorm:>9.3f}{by_floor:>9.3f}{floors:>8.3f}  {flag}"
        )
        if "prf_floor" in b[0]:  # keyed: also against the version's own PRF floor
            bp, ap = (statistics.median(r["cpu"] / r["prf_floor"] for r in v) for v in (b, a))
            brest, arest = (statistics.median(r["cpu"] - r["prf_floor"] for r in v) for v in (b, a))
            bprf, aprf = (min(r["prf_floor"] for r in v) for v in (b, a))
            lines.append(
                f"{'  ÷ own PRF floor (floor + rest)':<36}"
                f"{_seconds(bprf) + ' + ' + _seconds(brest):>22}"
                f"{_seconds(aprf) + ' + ' + _seconds(arest):>22}{'':>9}"
                f"{bp:>9.3f}{ap:>9.3f}{ap / bp:>9.3f}{'':>8}  "
                + (f"check (rest ×{arest / brest:.2f})" if ap / bp > SLOWER else "")
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--after", type=Path, default=HERE.parents[1], help="source tree (repo root)"
    )
    parser.add_argument("--before", default=None, help="commit (default: the last 0.4 one)")
    parser.add_argument("--rounds", type=int, default=None, help="default 5 (--quick: 2)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, 2 rounds (≤ ~1.5 min)")
    parser.add_argument("--only", nargs="+", choices=GROUPS, default=list(GROUPS))
    parser.add_argument(
        "--pinned-heap",
        action="store_true",
        help="glibc keeps freed memory in both children (no page-fault luck: code only)",
    )
    parser.add_argument("--child", nargs="+", choices=GROUPS, help=argparse.SUPPRESS)
    parser.add_argument("--expect", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, args.quick, args.expect)
        return
    after = args.after.resolve() / "src"
    repo = HERE.parents[1]
    rev = args.before if args.before is not None else before_commit(repo)
    rounds = args.rounds if args.rounds is not None else (2 if args.quick else 4)
    head = _git(args.after.resolve(), "rev-parse", "--short", "HEAD")
    dirty = (
        " (+ uncommitted changes)"
        if _git(args.after.resolve(), "status", "--porcelain", "--", "src")
        else ""
    )
    with tempfile.TemporaryDirectory(prefix="dpcount-before-") as tmp:
        archive = subprocess.run(
            ["git", "-C", str(repo), "archive", rev, "src"], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        before = Path(tmp) / "src"
        print(
            f"before = {rev} (last 0.4 commit), after = {args.after.resolve()} at {head}{dirty}; "
            f"{rounds} rounds, {'quick' if args.quick else 'full'} sizes"
            f"{', pinned heap' if args.pinned_heap else ''}; load average "
            f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs",
            flush=True,
        )
        start = time.perf_counter()
        results: dict[str, dict[str, list[dict[str, Any]]]] = {}
        trees = {"before": before, "after": after}
        for r in range(rounds):
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            # quick: one child per version and round (the import of 0.3 alone costs ~1.5 s
            # CPU); full: one per hot-path group, so before and after run seconds apart
            bundles = [args.only] if args.quick else [[group] for group in args.only]
            for groups in bundles:
                for name in order:
                    for row in run_child(trees[name], groups, args.quick, args.pinned_heap):
                        results.setdefault(row["path"], {"before": [], "after": []})[name].append(
                            row
                        )
            print(
                f"  round {r + 1}/{rounds} done at {time.perf_counter() - start:.0f} s, "
                f"load average {os.getloadavg()[0]:.1f}",
                flush=True,
            )
    print("\n".join(report(results)))
    print(
        "CPU seconds per call (update/step rows: per update); A÷B min: after ÷ before of the "
        "least; B/A÷floor: median over rounds of hot ÷ floor in the same child; A÷B fl.: "
        "their ratio; floors: after ÷ before of the floors themselves (identical code: "
        f"shows how evenly the load fell). Flag when > {SLOWER}."
    )


if __name__ == "__main__":
    main()
