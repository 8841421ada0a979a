"""Keyed continual counters at scale: embedded vs the PRF noise floor, Dask vs embedded,
Spark vs Dask.

One run, three timings on the same job (K keys × T steps, k-ary tree without
subtraction, exact discrete Laplace noise, ε = 1, event level, E random events):

* **floor**: generating exactly the node noise the job needs (Σ_ℓ ⌊T/k^ℓ⌋ samples per
  key) from the same PRF and sampler, chunk by chunk, nothing else;
* **embedded**: the whole run — events mapped to (key, step), bounded and summed,
  then the tree and its noise per key chunk (outputs streamed and discarded: the
  time to format an output file is not included);
* **dask**: the same run with ``engine="dask"`` on a fresh ``LocalCluster`` with
  ``--workers`` processes (cluster start-up not included; results gathered to the
  client and discarded; with ``--write DIR`` the workers write Parquet parts).

With ``--write DIR`` both engines write a directory of Parquet parts (the realistic
job) instead of discarding the counts.

Targets (issue 12): embedded ≤ 3× floor; Dask with 2 workers ≥ 1.5× the embedded
throughput (on a 2-core machine).

Measured 2026-11-24 on the 2-core development machine while ~6 other jobs ran
(load average 4-9, varying during a run), 10^5 keys x 10^3 steps, k = 2, 10^6 events,
chunks of 2048 keys; two separate runs of the script:

=====================  =====  ===========  ================  =====================
mode                   run    floor        embedded          Dask, 2 workers
=====================  =====  ===========  ================  =====================
counts discarded       1      15.3 s       21.1 s (1.38x)    21.9 s (0.97x emb.)
counts discarded       2       8.4 s       14.5 s (1.73x)    17.0 s (0.85x emb.)
Parquet parts written  1      12.8 s       36.6 s (2.87x)    23.3 s (1.57x emb.)
Parquet parts written  2      10.9 s       36.2 s (3.33x)    55.1 s (0.66x emb.)
=====================  =====  ===========  ================  =====================

(ratio columns: embedded ÷ floor; embedded ÷ Dask time = Dask throughput relative
to embedded.) The machine is shared, so the Dask figures in particular move with the
other jobs' load; the targets are met in some runs and missed in others.

After the windowed tree (nodes added by row selection), 2026-11-24, same job and
machine, ``--write`` (Parquet parts), load average 2.5-7 varying within a run:

==================================  ===========  ================  =====================
run (command)                       floor        embedded          Dask, 2 workers
==================================  ===========  ================  =====================
before it, ``--repeats 1``          17.3 s       55.4 s (3.20x)    47.4 s (1.17x emb.)
``--repeats 1`` (load 5-7)          22.6 s       37.1 s (1.64x)    36.4 s (1.02x emb.)
``--repeats 2``, best (load 2.5-4)   8.8 s       21.7 s (2.47x)    16.3 s (1.34x emb.)
same, Parts as Arrow tables (2-3)    7.0 s       18.7 s (2.67x)    13.7 s (1.37x emb.)
==================================  ===========  ================  =====================

(the other repeat of the third run: embedded 29.7 s = 3.37x; of the last run: floor
8.1 s, embedded 19.3 s = 2.37x.) On workers a chunk took
about twice as long as in the embedded run (0.86 s vs 0.44 s per chunk, from progress
timestamps of a separate Dask run and the best embedded run above) with both cores busy
with other jobs' processes; the Dask client's serial part before the first release
task was 1.3 s. ``--mechanism blt`` (Gaussian, δ = 1e-6, 6 buffers),
``--repeats 1 --no-dask --write``: floor (10^8 PRF Gaussians) 3.7 s, embedded 20.9 s
(5.6x its floor; faster than the tree in absolute time).

Before these changes (not rerun since), 10^6 keys x 10^3 steps, 10^7 events from a
Parquet file, Dask 2 workers, Parquet parts:
644 s, worker peak RSS 1167 MiB, client peak RSS 1.7 GiB, 1.4 GB of output.

On the idle machine (no other jobs, load < 1.5), 2026-11-24 12:42 UTC, ``--repeats 2
--write DIR``: floor 7.01 s, embedded 17.71 s (2.53x floor), Dask 2 workers 10.19 s
(1.74x the embedded throughput), worker peak RSS 508 MiB. Same day 13:04 UTC,
``--keys 1000000 --events 10000000 --dask-only --repeats 1 --write DIR`` (events as an
in-memory frame, not a Parquet file): 105.1 s, worker peak RSS 898 MiB, 1.4 GB of
Parquet parts.

One strategy, any engine (2026-11-27): the keyed run drives the registry's counting
mechanism (its noise process over the keys axis, noise from the PRF source). The floor
is now the PRF rows that process draws (counted by a dry run): for the binary tree the
stream process draws only the nodes releases use (~T per key, 1004 at T = 1000), where
0.3's keyed tree drew every node (Σ ⌊T/2^ℓ⌋ = 1994 per key). Same machine, heavily
loaded (load average 10-15), ``--no-dask --repeats 1``, main's code (0.3 engine, run
from /work/main) and this one run one after the other:

=================================  ==========================  ==========================
job                                0.3 keyed tree / BLT        registry mechanism
=================================  ==========================  ==========================
10^4 keys, tree, run 1             floor 32.7 s, emb. 49.4 s   floor 16.6 s, emb. 16.0 s
10^4 keys, tree, run 2             floor 10.7 s, emb. 11.8 s   floor 4.6 s, emb. 7.3 s
10^5 keys, tree (10^6 events)      floor 87.8 s, emb. 99.8 s   floor 42.0 s, emb. 55.8 s
10^4 keys, ``--mechanism blt``, 1  floor 4.8 s, emb. 12.7 s    floor 4.8 s, emb. 9.5 s
10^4 keys, ``--mechanism blt``, 2  floor 5.9 s, emb. 10.1 s    floor 5.2 s, emb. 11.2 s
=================================  ==========================  ==========================

So the tree run takes 0.56-0.62x the time of 0.3's (half the samples), at 1.3-1.6x its
own (halved) floor instead of 1.1-1.5x; BLT is within the load's noise (mean 10.3 s vs
11.4 s).

One-log PRF floor, resume without replay, Dask shards on the workers (2026-11-27,
heavily loaded machine: load average 12-15 from other engineers' jobs throughout, so
absolute times are 2-4x the idle ones and ratios move between runs):

* Floor alone, 10^6 exact discrete Laplace samples, old and new sampler interleaved
  in one process, best of 8-10: 426-469 ms -> 252-289 ms (1.62-1.69x faster).
* ``--from-file --repeats 1 --write DIR`` (10^5 keys x 10^3 steps, 10^6 events read
  by the workers from Parquet), the code before these changes then after, one after
  the other (the second overlapped the start of the 10^6 run below):

  ===========================  ====================  ====================
  figure                        before                after
  ===========================  ====================  ====================
  floor                         103.5 s               45.4 s
  embedded                      156.4 s (1.51x)       108.9 s (2.40x)
  Dask, 2 workers               262.9 s (0.60x emb.)  143.9 s (0.76x emb.)
  Dask worker peak RSS          400 MiB               426 MiB
  Dask client peak RSS          447 MiB (+193)        391 MiB (+103)
  bytes the client sent         23.9 MiB              4.3 MiB
  ===========================  ====================  ====================

  (client: peak, and in brackets its growth during the run; bytes sent: pickled
  task arguments, graphs and scattered data.) With the events as an in-memory frame
  instead (no ``--from-file``) the frame itself is shipped: 0.3's 157 MiB graph.
* ``--keys 20000 --events 200000 --no-dask --repeats 3`` (new code, while the 10^6
  run below ran): floor 6.37 s, embedded 10.80 s = 1.63-1.70x floor (target 1.5: not
  reached on this load; the profile shows the remaining overhead in the tree's
  overflow check, the dense contributions and the release copy).
* ``--keys 1000000 --events 10000000 --dask-only --from-file --repeats 1 --write
  DIR`` (new code): 894 s (target 75 s idle; 0.3 measured 105-118 s idle, so this
  load inflates by ~8x and no conclusion on the target is possible), worker peak
  RSS 1427 MiB, client peak RSS 1142 MiB (252 MiB at the start), 60.6 MiB sent
  (the job with its 10^6-key universe goes to the shard tasks).
* 10^7 keys x 100 steps: not run (no idle machine and no time left).

CPU seconds beside wall seconds, fewer Dask stages (2026-11-27, second round; loaded
machine, load average 5-14 while measuring: wall seconds say little, CPU seconds —
user + system of this process, and for Dask of the client, its in-process scheduler
and both workers — are the figures to compare; ratios within one run):

* ``--no-dask --repeats 1`` (10^5 keys x 10^3 steps, 10^6 events, counts discarded),
  the code before this round (a096372) and after it, interleaved before/after/
  before/after: embedded 10.82 / 9.41 s CPU = 1.28 / 1.32 x floor (before), 8.84 /
  8.54 s CPU = 1.09 / 1.41 x floor (after; the floor itself moved 6.05-8.46 s CPU
  between runs with the machine's memory pressure). The saving is the event
  preparation (0.6 s of 1.0 s: one int64 sort instead of two pandas groupbys for
  whole-number weights). What remains above the floor, measured with page faults
  removed (glibc mmap and trim thresholds raised): 0.6 s in the tree's structure
  (counting/tree.py: the node sums, the overflow check), 0.3 s dense contributions
  and exact running sums, 0.4 s preparation — 1.19 x floor CPU.
* ``--from-file --write DIR --repeats 1`` (the same job, Parquet parts): writing the
  parts is most of the embedded run (19-22 s CPU, of which ~10 s Parquet encoding:
  ~0.15 s CPU per 2048-key chunk, spread over all five columns, compression ~10% of
  it). Dask, 2 workers: before 36.6 s CPU, 0.61 x embedded CPU, 0.71 x wall (load
  10.8); after the restructure 35.0 s CPU, 0.60 x CPU, 0.62 x wall (load 10.9), and
  with the quiet LocalCluster 24.8 s CPU, 0.77 x embedded CPU, 0.70 x wall (load 6.5).
  At a lighter load, one after the other (same script): before (a096372) embedded
  20.42 s CPU / 33.4 s wall, Dask 30.79 s CPU / 38.6 s wall = 0.66 x embedded CPU,
  0.87 x wall (load 2.8-4.5); after, embedded 20.01 s CPU / 28.6 s wall, Dask
  22.33 s CPU / 27.2 s wall = 0.90 x CPU, 1.05 x wall (load 4.1-4.2).
  Client sent 4.3 -> 0.7 MiB; client peak RSS 314 -> 240 MiB; worker peak RSS 443 ->
  350 MiB. Where the Dask CPU went before: ~15 of 35 s in distributed's housekeeping
  (20 ms ticks, 100 ms memory checks, the statistical profiler: ~0.035 CPU s per s
  per worker and ~0.05 in the client, measured idle), which a loaded machine
  multiplies by stretching the wall time; quiet settings cut it ~85%.
* 5 x 10^4 keys, ``--write``, task stream of one Dask run (load 4.3): both workers
  busy 83-86% of the 11.9 s span, the release tasks 2.1-11.9 s; 13.4 s CPU in all
  (workers 5.1 + 6.1, client 2.2 with the first import of dask.dataframe) against
  10.5 s embedded: 1.15 x embedded wall, 0.78 x CPU. On an idle 2-core machine that
  CPU split bounds the Dask run at ~6.7 s wall (~1.5 x embedded); not measured here.

10^7 keys x 100 steps on Dask (issue 23: <= 2 GiB per worker, <= 1 GiB on the client),
2026-11-27, 2 x 10^7 events read by the workers from one Parquet file (20 row groups of
2^20 rows, written beforehand by a process of its own, so that the client's figures are
the run's and not the generator's), 2 workers writing Parquet parts (1.2 GB, 4883
parts); ``--keys 10000000 --steps 100 --events 20000000 --dask-only --from-file --write
DIR --repeats 1``, this script on the code before these changes (8bfbc4d) and after,
machine shared with another engineer's jobs:

==========================  ========================  ========================
figure                      before                    after
==========================  ========================  ========================
wall (load average)         173.5 s (2.1)             140.2 s (2.1); 216.4 s (4.3)
CPU, client and workers     278.5 s                   245.6 s; 254.2 s
worker peak RSS             2256 MiB                  1313 MiB; 1316 MiB
client peak RSS             1485 MiB (131 at start)   187 MiB (131 at start)
bytes the client sent       95.2 MiB                  0.1 MiB
==========================  ========================  ========================

What grew with the number of keys, measured at 10^6 and 3 x 10^6 keys (2 events per
key; before: client 427 / 677 MiB, workers 425 / 870 MiB, so ~1.55 GiB and ~2.6 GiB
extrapolated to 10^7 — the measured 1485 / 2256 MiB above):

* the key universe: ``keys=range(n)`` became a tuple of n Python ints (~36 bytes a
  key: 120 MiB at 3 x 10^6) on the client, went pickled into the job twice (without
  and with the run secret; 14 MiB at 3 x 10^6, the "large graph" warning), was
  unpickled into each worker (another ~140 MiB there), and every input partition built
  a pandas hash index of it to match the event keys (+140 MiB transient). A ``range``
  now stays a ``range`` (``KeyUniverse``): the same digest (the secret's
  configuration) and the same key matching (a ``pandas.RangeIndex``, arithmetic).
  3 x 10^6 keys: client 677 -> 244 MiB, workers 870 -> 710 MiB.
* the input: dask's ``read_parquet`` made one partition of the whole file, read by one
  task on one worker (at 10^7: a 320 MB frame; pandas reading the file in one process
  took 820 MB of RSS with Arrow's buffers) and split four ways there. The Dask engine
  now reads blocks of whole row groups of at most 32 MiB (``PARQUET_BLOCK``) and drops
  each input partition once summed (and each partition's sums once the shards hold
  them) instead of at the end of the stage. 3 x 10^6 keys, sampled worker RSS: the
  worker that read the file 702 -> 651 MiB (partitions dropped early) -> 561 MiB (row
  group blocks), the other ~450 -> 413 -> 525 MiB (it now reads half the file).

Where the workers peak now at 10^7 keys (a separate run sampling each worker's RSS every
50 ms against distributed's task stream, load 1.2-1.9; 128 s wall): while the shards
are summed (``_finish_shard``, 12-13 s into the run: 1247 and 1157 MiB), holding the
contributions (24 bytes per (key, step) with events: 2 x 10^7 x 24 B = 480 MB over both
workers, in 8 shards), the partial sums still on their way to the shards and the
temporaries of one shard's concatenation and sort; bounding and summing a partition of
5 x 10^6 events peaked at 851-1102 MiB. The release stage (the noise and the part
writer) runs flat at 611-786 MiB, so the part writer is not what peaks; it is 89% of
the wall time (114 of 128 s).

After the Parquet encodings and the cache-sized PRF slices, and with kbig's memory
changes, on the idle machine (2026-11-27 15:27-15:37 UTC, load average 1.0-2.2 — the
runs' own processes; nothing else running):

Before (8bfbc4d, idle, the previous session) -> now:

* floor, 10^5 x 10^3, CPU: 7.35 s -> 4.62 s (1.59x faster);
* embedded, counts discarded, CPU: 9.65 s = 1.31x floor -> 5.64 s = 1.22x floor;
* embedded, ``--from-file --write``, wall: 20.47 s -> 13.67 s;
* Dask 2 workers, the same, wall: 13.70 s = 1.49x embedded -> 10.14 s = 1.35x embedded;
* 10^6 x 10^3, ``--dask-only --from-file --write``: 104.5 s, worker 1066 MiB, client
  389 MiB -> 75.1 s and 85.7 s in two runs (140-154 s CPU), worker 768-786 MiB, client
  185 MiB;
* 10^7 x 100, 2 x 10^7 events, the same flags: not run -> 125.6 s (225 s CPU), worker
  1241 MiB, client 187 MiB, 0.1 MiB sent, 1.5 GB of parts.

The floors of the three ``--write`` runs moved between 3.35 and 5.54 s CPU (page faults
of the floor's fresh arrays); the embedded figure is the best of two. Dask's throughput
ratio fell because the embedded run gained more (20.5 -> 13.7 s) than the Dask run
(13.7 -> 10.1 s): in Dask runs split as client + scheduler 0.7-1.8 s CPU and the two
workers 6.2-9.2 s each (16-17 s in all against embedded's 13 s), so the workers carry
~3.5 s of CPU beyond the embedded run's and one of them often idles at the end (7 shards
of 7 chunks over 2 workers: 4 against 3). Release tasks of ~2 chunks (16 per worker)
evened the workers' CPU (8.15 / 8.48 s) without shortening the wall time (10.1-11.0 s),
so that change was not kept. What was kept instead (16:03-16:10 UTC, idle): the shards
are the asked 8 with chunk counts differing by at most one (``_shard_edges``; 49 chunks
had made 7 shards of 7, 4 on one worker and 3 on the other), and the client imports
``dask.dataframe`` before the timed run, as part of start-up like the cluster (1-3 s in
a fresh process; the best-of-R figures were already warm). Task stream of one 10^5-key
run: workers' release CPU 8.27 / 8.20 s (was 8.71 / 6.68 s), wall 9.91 s. Then
``--from-file --write`` at 10^5 keys: embedded 15.59 s, Dask 10.34 s = 1.51x (best of
2); embedded 15.87 s, Dask 10.07 s = 1.58x (best of 3). The embedded run itself moved
between 13.67 and 16.6 s (best of 2-3) across the afternoon's runs, so against its best
(13.67 s) the Dask figure is 1.36x: the 1.5x target is met against the same run's
embedded time and not against the day's best. 10^6 keys: 78.7 s and 80.5 s (148-151 s
CPU, worker 747-825 MiB): the 75 s target is not met (75.1-85.7 s in four runs).

Required Parquet columns, per-width repeated columns, the floor table (2026-11-27
17:02-17:31 UTC, idle machine: load average 0.6-2.1, the runs' own processes):

* one part of 2048 keys x 1000 steps (integer counts), CPU best of 7: Parquet write
  0.089 s -> 0.067 s with the columns declared required (no definition levels to
  encode; with the key column left nullable, measured later at a slower moment of the
  machine: 0.131 s -> 0.100 s, best of 15 interleaved); building its Arrow table
  47 ms -> 10 ms (``ChunkTables``: key codes, step, time and std built once per chunk
  width);
* exact geometric floors, 2^21 PRF words at t = 10: 21 ms -> 10-12 ms (``_floor_table``;
  the same samples);
* cProfile of one embedded ``--write`` run, 10^5 x 10^3: 14.4 s -> 11.6 s wall (Parquet
  writing 5.8 -> 4.6 s, the sampler 4.7 -> 3.5 s);
* the floor itself, 10^5 x 10^3, CPU: 4.62 s (previous session) -> 1.84-2.70 s in eight
  runs (the table, and page faults: see below); embedded, counts discarded: 5.64 s
  (1.22x its floor then) -> 3.56-4.54 s CPU = 1.46-1.68x today's floor in five runs; the
  last, after the tree's digit-0 column was written once (next_many 50 -> 37 ms per
  1000 x 2048 block): floor 2.59 s, embedded 3.85 s = 1.49x. The noise got 1.9x
  cheaper and the rest of the run (tree sums, running sums, event preparation, ~1.3 s)
  did not, so the ratio rose although every figure fell;
* ``--from-file --write``, 10^5 x 10^3, Dask 2 workers against embedded in the same
  run: 1.26x (8.31 vs 10.46 s; workers' imports inside the timed run), then with the
  workers warmed (imports are start-up, as the client's): 1.62x (5.44 vs 8.81 s, best
  of 2), 1.40x (7.01 vs 9.84 s, best of 3), 1.82x (5.78 vs 10.52 s, best of 3);
* 10^6 x 10^3, ``--dask-only --from-file --write DIR --repeats 1``: 55.4, 56.1, 57.6 s
  (102-104 s CPU, worker 751-781 MiB, client 185-186 MiB): the 75 s target is met (it
  was 75.1-85.7 s);
* 10^7 x 100, 2 x 10^7 events, the same flags: 98.2 s (170 s CPU), worker 1340 MiB,
  client 187 MiB, 0.1 MiB sent.

Page faults: an embedded 10^5 run takes ~145,000 minor page faults (glibc gives back
and maps again the memory of the large temporary arrays); with glibc's mmap and trim
thresholds raised (``MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=268435456``
in the environment) 2,000, and the embedded run took 3.6 s CPU instead of 4.5 s, the
floor 1.9 s instead of 2.9 s (same script, one after the other). Setting them in our
LocalCluster's workers did not change the 10^6 run (58.6 s), so that was not kept; a
user's own process can set them. Also tried and not kept (18:09-18:17 UTC): subtracting
the table's floors slice by slice into G1 - G2 instead of filling an array of the words'
size (the same samples, 40 cases checked). In a fresh process it cut the embedded run's
faults from 145,000 to 57,500 and its CPU from 4.9 to 3.9-4.2 s, but after the floor had
run in the same process the embedded run took 125,000-237,000 faults and 4.65-6.1 s
(glibc's adaptive thresholds depend on what was freed before), and the 10^6 x 10^3 Dask
run took 66.0 s against 57.1 s for the code without it, one after the other.

String keys (``--string-keys``: a list universe ``sku-000000000`` ..., the events' key
column as those strings), ``--dask-only --from-file --write DIR --repeats 1``, idle
(2026-11-27 17:41-17:49 UTC):

* 10^6 x 10^3, 10^7 events: before the universe's lookup index was kept (cea0ce8, the
  same script with that tree's ``src`` first on the path) 78.3 s, 133.9 s CPU, worker
  1052 MiB, client 527 MiB; after, 61.9 s, 111.0 s CPU, worker 1094 MiB, client
  504 MiB (30.7 MiB sent both times: the job holds the universe);
* 10^7 x 100, 2 x 10^7 events: 249.8 s, 364.2 s CPU, worker 2813 MiB, client 2863 MiB
  (858 MiB at the start: the script's own list of keys), 305.5 MiB sent. A universe of
  10^7 strings does not fit the 2 GiB / 1 GiB limits that ``range(10^7)`` meets: it is
  a tuple of Python strings in every process (~700 MiB), pickled into the job, and
  each worker hashes all of it to match its events.

Spark (issue 32, item 8: local[2] within 1.5x the Dask time of the same run), 2026-12-06,
the shared 2-core machine (~8 engineers' jobs; load average 1-19 during the runs),
``--keys 1000000 --steps 1000 --events 1000000 --dask-only --spark --repeats 1
--from-file --write DIR`` (both engines read the Parquet events file on their workers
and write 489 Parquet parts, 1.4 GB; start-up of the cluster and the session not timed;
every part byte-identical between the two engines, md5 of all 489 compared):

=========  ===================  ===================  ==================
run        Dask, 2 workers      Spark local[2]       Spark / Dask
=========  ===================  ===================  ==================
1          403.0 s (load 13.5)  127.4 s (load 7.7)   0.32
2          131.6 s (load 7.6)    83.1 s (load 5.2)   0.63
3           38.2 s (load 1.3)    38.1 s (load 1.8)   1.00
=========  ===================  ===================  ==================

(in runs 1 and 2 the load moved between the two timings, so their ratios are rough;
run 3, 18:24 UTC, had the machine nearly to itself: the two engines take the same
time, within the 1.5x target.) Again after the keys join and the narrowed counts
(2026-12-07 03:35 UTC, 8461ae1, machine otherwise idle, load 1.0-1.7, the same command):
Dask 34.05 s wall (64.7 s CPU; worker peaks 386 / 390 MiB, client 187 MiB), Spark
local[2] 31.29 s, 0.92x. Smaller jobs, where Spark's fixed cost per run (its
stages, two shuffles and broadcasts: ~2-3 s) weighs: 10^5 keys x 10^3 steps (10^6 events),
18:25 UTC, load 1.5: Dask 5.2 s, Spark 7.9 s (1.51x); 2 x 10^4 keys (2 x 10^5 events),
load 19: Dask 26.9 s, Spark 34.3 s (1.28x).

A string universe from a keys file (issue 32, item 8: 10^7 string keys x 100 steps on
Dask within 2 GiB per worker and 1 GiB on the client), ``--string-keys --keys-file
--dask-only --from-file --write DIR --repeats 1`` (the universe as ``keys=PATH``, the
script holding no list; client peak sampled every 20 ms, workers' peak from
``getrusage``), 2026-12-06 on the shared 2-core machine (~8 engineers' jobs, load average
6-30: wall times are not comparable), the code before keyed/io.py (cc62ea3) and after it:

====================================  ========================  =======================
job                                   before (worker / client)  after (worker / client)
====================================  ========================  =======================
10^6 keys x 100 steps, 2 x 10^6 ev.   561 / 513 MiB             513 / 550 MiB
10^7 keys x 100 steps, 2 x 10^7 ev.   3536 / 2890 MiB           2976 / 2967 MiB
====================================  ========================  =======================

(30.6 and 305.5 MiB sent to the cluster: the job holds the universe; 10^7: 447 s wall
before, 523 s after, 210 s CPU both.) The same code path before and after — reading the
keys file moved to the run's entry point, the universe still goes whole to every
process — so the differences are run-to-run variation (which worker reads which input
block and holds which shard when it peaks), not a change.

The distributed key -> index join scheduled (``dpcount.keyed.keys.FileUniverse``: the
client streams the file once for its block table and digest; the workers join the
partitions' distinct keys to the file by hash bucket, 8 bytes a key back to each
partition, and name released keys from the file's blocks), 2026-12-06 22:26-23:43 UTC,
the same flags (10^7 keys x 100 steps, 2 x 10^7 events, 2 workers writing 4883 parts),
main (5965e39) then this branch, one session on the shared 2-core machine:

==========================  =========================  ========================
figure                      before (main)              after
==========================  =========================  ========================
worker peak RSS             3673 MiB                   1553, 1574 MiB
client peak RSS             3676 MiB (170 at start)    197 MiB (171 at start)
bytes the client sent       458.1 MiB                  0.5 MiB
wall, CPU (load average)    1335 s, 269 s (15.1)       338 s, 211 s (6.3)
==========================  =========================  ========================

(wall times are not comparable: the load differed.) On the way: the first wiring, which
sent each partition its known keys as Python strings and computed every input
partition ahead of its preparation, peaked at 2197 / 2353 MiB per worker; matching as
Arrow strings, hashing 2^18 keys at a time (pandas' ``hash_array`` of 4 x 10^6 strings
took 0.9 GiB of temporaries at once) and reading each partition when it is prepared
brought it to the figures above. The client's 197 MiB is its start-up plus the file
streamed a MiB at a time.

The Dask runner against 0.4 (issue 32, item 8: "not slower than 0.4 by more than 5%"),
2026-12-07, ``--keys 100000 --steps 1000 --events 1000000 --dask-only --repeats 1`` (events
in memory, the counts gathered to the client and discarded), profiled with py-spy over
the client and both workers and by per-process CPU (the shared 2-core machine, load
7-16). Where a run's CPU went (client with its scheduler + 2 workers, ~7-8 s in all at
that load; 0.4 the same code path): **moving the counts to the client**. 10^5 keys x
10^3 steps of int64 counts are 800 MB; with the release tasks' counts dropped on the
workers (an experiment, interleaved) the run took 3.5-4.5 s CPU instead of 7.0-8.1 s
(client 0.35 s instead of 1.2-2.3 s; workers 1.3-2.0 s each instead of 2.5-3.3 s: ~20%
of a worker's samples were in pickling the results for the socket, the client's in the
socket reads and unpickling). The release itself (the tree and its noise: the engine)
was ~40% of a worker's samples; bounding and summing the partitions ~2%, merging the
shards ~1%, the noise key derived per chunk < 0.3%; the client's ``dd.from_pandas``
computed sorted divisions of the frame's index (0.15 s CPU per run; the graph itself,
15 MiB, is the events and was 0.4's too). So a release task now sends each chunk's
counts in the narrowest integer type holding them (``stages.Narrowed``: these counts fit
int16, 200 MB), the client widens them back (the same values and type), a quiet chunk
sends none, and a frame's partitions are row blocks without divisions. The before/after
script ``benchmarks/bench_dask_before_after.py`` runs 0.4 (b24b7db) and this tree
alternately, each in a fresh process with a fresh cluster; 3 rounds at load 13-21 (not
idle):

==========  ===============  ===============  ===============  ===============
version     CPU best         CPU median       wall best        wall median
==========  ===============  ===============  ===============  ===============
0.4         8.28 s           8.29 s           20.17 s          33.46 s
this        5.26 s           5.46 s           13.51 s          24.30 s
this ÷ 0.4  0.635            0.659            0.670            0.726
==========  ===============  ===============  ===============  ===============

(peak RSS: workers 633 -> 356 MiB, client 504 -> 306 MiB.) Again at load 10-13, after
the slow suites: CPU best 7.13 -> 5.24 s (0.735), median 7.80 -> 5.38 s (0.690); wall best
16.42 -> 10.41 s (0.634), median 17.40 -> 10.53 s (0.605). With ``--write DIR`` (the
workers write Parquet parts; the counts never travel) the two versions are level, 2
rounds at load 12: CPU median 9.57 s both (1.001), wall median 22.22 -> 22.14 s (0.996):
that path's time is the release and the Parquet encoding, code this work did not change.

Usage: python benchmarks/bench_keyed.py [--keys K] [--steps T] [--k k] [--events E]
       [--chunk-keys C] [--workers W] [--repeats R] [--no-dask] [--dask-only] [--spark]
       [--from-file] [--write DIR] [--mechanism tree|blt|sqrt|toeplitz|normalized-sqrt]
       [--string-keys [--keys-file]]
Timings are the best of R interleaved runs (floor, embedded, floor, ...); Dask once
per repeat as well.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import pandas as pd

from dpcount.keyed import run
from dpcount.keyed.events import EventColumns, parse_times
from dpcount.keyed.job import make_job
from dpcount.keyed.secret import unsafe_testing_secret
from dpcount.privacy import Budget


def keyed_counts(events: Any, **kw: Any) -> Any:
    """The run of ``kw`` (0.4's keywords) on this tree: through the option groups where
    it has them (0.5: :func:`dpcount.keyed.spec.from_keywords`), so that one script
    times the hot paths of either version."""
    try:
        from dpcount.keyed.spec import from_keywords  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return run.keyed_counts(events, **kw)
    return run.keyed_counts(events, **from_keywords(**kw))


def _runner_module(name: str) -> Any:
    """``dpcount.keyed.runners.NAME`` (0.5), or ``dpcount.keyed.NAME`` before it."""
    import importlib

    try:
        return importlib.import_module(f"dpcount.keyed.runners.{name}")
    except ImportError:
        return importlib.import_module(f"dpcount.keyed.{name}")


SECRET = b"benchmark-secret-not-for-use-000"
TESTING = unsafe_testing_secret(SECRET)  # a fixed secret: benchmarks only


def _events(n_keys: int, horizon: int, n_events: int, text: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    keys = rng.integers(0, n_keys, n_events)
    return pd.DataFrame(
        {"t": rng.integers(0, horizon, n_events), "key": _text_keys(keys) if text else keys}
    )


def _text_keys(indices: Any) -> Any:
    """Key i as the string ``sku-`` + i in 9 digits (``--string-keys``)."""
    return np.char.add("sku-", np.char.zfill(np.asarray(indices).astype(str), 9)).astype(object)


def _write_events(n_keys: int, horizon: int, n_events: int, path: str, text: bool = False) -> None:
    _events(n_keys, horizon, n_events, text).to_parquet(path, row_group_size=1 << 20)


def _write_keys(n_keys: int, path: str) -> None:
    """The ``--string-keys`` universe as a keys file (one key a line), in blocks."""
    with open(path, "w", encoding="utf-8") as fh:
        for lo in range(0, n_keys, 1 << 20):
            fh.write("\n".join(_text_keys(np.arange(lo, min(n_keys, lo + (1 << 20))))) + "\n")


def _kwargs(
    n_keys: int, horizon: int, k: int, chunk: int, mechanism: str = "tree", text: bool = False
) -> dict[str, Any]:
    extra: dict[str, Any] = (
        {"mechanism": mechanism, "budget": Budget(epsilon=1.0, delta=1e-6, noise="gaussian")}
        if mechanism != "tree"
        else {
            "mechanism": "tree",
            "budget": Budget(epsilon=1.0, noise="discrete-laplace"),
            "k": k,
        }
    )
    return dict(
        keys=list(_text_keys(np.arange(n_keys))) if text else range(n_keys),
        time_column="t",
        key_column="key",
        step=1,
        start=0,
        horizon=horizon,
        secret=TESTING,
        chunk_keys=chunk,
        **extra,
    )


def _cpu() -> float:
    """CPU seconds (user + system) of this process so far."""
    import os

    t = os.times()
    return t.user + t.system


def floor(kw: dict[str, Any]) -> tuple[float, float, int]:
    """Seconds (wall, CPU) to draw exactly the PRF samples the job's noise process draws
    (rows per key block counted by a dry run of the process), and the number of samples."""
    from dpcount.keyed.engine import STEP_BLOCK
    from dpcount.keyed.prf import PositionPRF, PRFWords
    from dpcount.privacy.source import NoiseSource

    columns = EventColumns("t", "key")
    job, _ = make_job(
        times=parse_times(pd.Series([0]), "t"),  # unused: start and horizon are given
        keys=kw["keys"],
        columns=columns,
        step=1,
        budget=kw["budget"],
        max_weight=1,
        max_keys=None,
        start=0,
        horizon=kw["horizon"],
        k=kw.get("k"),
        mechanism=kw.get("mechanism", "tree"),
    )
    try:  # the lifecycle moved to keyed/session.py (after 0.4)
        from dpcount.keyed.session import with_secret
    except ImportError:
        job, _ = job.with_secret(TESTING)
    else:
        job, _ = with_secret(job, TESTING)
    m = job.mechanism
    c = m.counting
    counter = NoiseSource(c.sampler, None, m.key_block)  # zeros: counts the rows drawn
    process = c.noise_process(counter, m.key_block)
    for t in range(0, m.horizon, STEP_BLOCK):
        process.next_many(min(STEP_BLOCK, m.horizon - t))
    prf = PositionPRF(SECRET, f"stream/{m.noise}", m.key_block)
    samples = 0
    start, cpu = time.perf_counter(), _cpu()
    for lo in range(0, m.n_keys, m.key_block):
        words = NoiseSource(c.sampler, PRFWords(prf, lo, lo + m.key_block), m.key_block)
        samples += words.sample((counter.rows_drawn, m.key_block)).size
    return time.perf_counter() - start, _cpu() - cpu, samples


def _discard(lo: int, values: Any) -> None:
    del lo, values


def _sink(write: str | None, name: str) -> dict[str, Any]:
    """Stream the chunks away, or write a fresh directory of Parquet parts under ``write``."""
    if write is None:
        return {"on_chunk": _discard}
    import shutil
    from pathlib import Path

    target = Path(write) / name
    shutil.rmtree(target, ignore_errors=True)
    return {"output": target}


def embedded(
    events: pd.DataFrame, kw: dict[str, Any], write: str | None = None
) -> tuple[float, float]:
    """Seconds (wall, CPU) of the whole embedded run."""
    start, cpu = time.perf_counter(), _cpu()
    keyed_counts(events, **_sink(write, "embedded"), **kw)
    return time.perf_counter() - start, _cpu() - cpu


def _peak_rss_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


class _ClientMeter:
    """Peak resident memory of this (client) process during a run, sampled every 20 ms,
    and the bytes the client hands to the cluster: the pickled size of the arguments
    of every ``Client.submit`` / ``Client.scatter`` and of every task of
    ``Client.compute`` (futures pickle to a few bytes: data already on the workers is
    not sent again). Pickling them a second time adds to the run's time."""

    def __init__(self) -> None:
        import threading

        import psutil

        self._proc = psutil.Process()
        self.baseline = self.peak = self._proc.memory_info().rss
        self.sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self._proc.memory_info().rss)

    def __enter__(self) -> _ClientMeter:
        from distributed import Client
        from distributed.protocol.pickle import dumps

        def sizeof(value: Any) -> int:
            return len(dumps(value))

        self._originals = {name: getattr(Client, name) for name in ("submit", "scatter", "compute")}
        meter = self

        def submit(client: Any, func: Any, *args: Any, **kwargs: Any) -> Any:
            meter.sent += sizeof(args)
            return meter._originals["submit"](client, func, *args, **kwargs)

        def scatter(client: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
            meter.sent += sizeof(data)
            return meter._originals["scatter"](client, data, *args, **kwargs)

        def compute(client: Any, collections: Any, *args: Any, **kwargs: Any) -> Any:
            items = collections if isinstance(collections, (list, tuple)) else [collections]
            for item in items:
                graph = dict(item.__dask_graph__())
                meter.sent += sum(sizeof(task) for task in graph.values())
            return meter._originals["compute"](client, collections, *args, **kwargs)

        Client.submit, Client.scatter, Client.compute = submit, scatter, compute  # type: ignore[method-assign]
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        from distributed import Client

        self._stop.set()
        self._thread.join()
        for name, original in self._originals.items():
            setattr(Client, name, original)


def _warm_worker() -> None:
    """Import in a worker what the run's tasks import (0.5-1.5 s in a fresh process):
    start-up, like the cluster itself and the client's ``dask.dataframe``."""
    import dask.dataframe  # noqa: F401
    import pyarrow.parquet  # noqa: F401

    import dpcount.keyed.run  # noqa: F401

    _runner_module("dask")


def dask_run(
    events: Any, kw: dict[str, Any], workers: int, write: str | None = None
) -> tuple[float, float, list[float], _ClientMeter]:
    """Seconds of the Dask run on a LocalCluster as the engine starts it (start-up not
    timed): wall, and CPU of the client (with the LocalCluster's scheduler, which runs
    in it) and all workers together; each worker process's peak resident memory
    (``getrusage`` in the worker; the cluster is fresh), MiB; the client's memory and
    bytes sent (:class:`_ClientMeter`)."""
    from contextlib import ExitStack

    import dask.dataframe  # noqa: F401  (start-up, as the cluster: 1-3 s in a fresh client)

    _client = _runner_module("dask")._client

    with ExitStack() as stack:
        client = _client(None, workers, stack)
        client.wait_for_workers(workers)
        client.run(_warm_worker)  # start-up, as the cluster's: imports, not the run's work
        start, cpu, workers_cpu = time.perf_counter(), _cpu(), client.run(_cpu)
        with _ClientMeter() as meter:
            keyed_counts(
                events,
                engine="dask",
                scheduler=client,
                partitions=2 * workers,
                **_sink(write, "dask"),
                **kw,
            )
        seconds, used = time.perf_counter() - start, _cpu() - cpu
        used += sum(t - workers_cpu[w] for w, t in client.run(_cpu).items())
        return seconds, used, sorted(client.run(_peak_rss_mib).values()), meter


def _warm_spark_worker(_: Any) -> None:
    """Import in a Spark Python worker what the run's tasks import (start-up, as the
    session's: the workers are reused by the run)."""
    import pyarrow.parquet  # noqa: F401

    import dpcount.keyed.run  # noqa: F401

    _runner_module("spark")


def spark_run(events: Any, kw: dict[str, Any], workers: int, write: str | None = None) -> float:
    """Wall seconds of the Spark run on a ``local[workers]`` session (start-up not timed:
    the session is started and its Python workers import dpcount first), with
    ``2 * workers`` input splits as the Dask run's partitions."""
    from contextlib import ExitStack

    _session = _runner_module("spark")._session

    with ExitStack() as stack:
        session = _session(f"local[{workers}]", stack)
        session.sparkContext.parallelize(range(workers), workers).foreach(_warm_spark_worker)
        start = time.perf_counter()
        keyed_counts(
            events,
            engine="spark",
            master=session,
            partitions=2 * workers,
            **_sink(write, "spark"),
            **kw,
        )
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=10**5)
    parser.add_argument("--steps", type=int, default=10**3)
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument(
        "--mechanism",
        choices=("tree", "blt", "sqrt", "toeplitz", "normalized-sqrt"),
        default="tree",
        help="tree: discrete Laplace (the issue's targets); the others: Gaussian, delta 1e-6",
    )
    parser.add_argument("--events", type=int, default=10**6)
    parser.add_argument(
        "--string-keys",
        action="store_true",
        help="keys are the strings sku-000000000 ... (a list universe), not range(K)",
    )
    parser.add_argument(
        "--keys-file",
        action="store_true",
        help="with --string-keys: the universe as a keys file (keys=PATH, written by a "
        "process of its own), so the script holds no list of keys",
    )
    parser.add_argument("--chunk-keys", type=int, default=2048)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-dask", action="store_true")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--dask-only", action="store_true", help="skip floor and embedded")
    parser.add_argument(
        "--spark",
        action="store_true",
        help="also run engine='spark' on local[--workers] after the Dask runs (the ratio to "
        "the Dask time of the same run; the spark extra and Java 17)",
    )
    parser.add_argument(
        "--from-file",
        action="store_true",
        help="save the events to a Parquet file and have the engines read it",
    )
    parser.add_argument(
        "--write",
        metavar="DIR",
        default=None,
        help="write Parquet part directories under DIR (Dask workers write their own parts) "
        "instead of discarding the counts",
    )
    args = parser.parse_args()
    events: Any
    if args.from_file:
        import multiprocessing
        import tempfile

        # written by a process of its own: the client's memory is then the run's, not
        # the generator's (2 * 10^7 events are 320 MB in a frame)
        events = tempfile.mkdtemp(prefix="bench-keyed-") + "/events.parquet"
        writer = multiprocessing.get_context("spawn").Process(
            target=_write_events,
            args=(args.keys, args.steps, args.events, events, args.string_keys),
        )
        writer.start()
        writer.join()
        if writer.exitcode != 0:
            raise SystemExit(f"writing the events failed (exit code {writer.exitcode})")
    else:
        events = _events(args.keys, args.steps, args.events, args.string_keys)
    if args.keys_file and not args.string_keys:
        raise SystemExit("--keys-file needs --string-keys")
    kw = _kwargs(
        args.keys,
        args.steps,
        args.k,
        args.chunk_keys,
        args.mechanism,
        args.string_keys and not args.keys_file,
    )
    if args.keys_file:
        import multiprocessing
        import tempfile

        kw["keys"] = tempfile.mkdtemp(prefix="bench-keyed-") + "/keys.txt"
        keys_writer = multiprocessing.get_context("spawn").Process(
            target=_write_keys, args=(args.keys, kw["keys"])
        )
        keys_writer.start()
        keys_writer.join()
    what = (
        f"{args.mechanism}, Gaussian"
        if args.mechanism != "tree"
        else f"k={args.k}, discrete Laplace"
    )
    print(
        f"{args.keys:,} keys x {args.steps:,} steps, {what}, "
        f"{args.events:,} events, chunk {args.chunk_keys} keys"
    )
    # interleaved, best of --repeats: the machine's load moves between the two timings;
    # CPU seconds (user + system) are less sensitive to it than wall seconds
    import os

    t_floor, t_emb = float("inf"), float("inf")
    c_floor, c_emb = float("inf"), float("inf")
    for _ in range(0 if args.dask_only else args.repeats):
        t, c, samples = floor(kw)
        t_floor, c_floor = min(t_floor, t), min(c_floor, c)
        t, c = embedded(events, kw, args.write)
        t_emb, c_emb = min(t_emb, t), min(c_emb, c)
        print(
            f"floor (PRF noise only): {t_floor:8.2f} s wall {c_floor:8.2f} s CPU  "
            f"{samples:,} samples  {samples / c_floor / 1e6:.1f} M samples/CPU s"
        )
        print(
            f"embedded (whole run):   {t_emb:8.2f} s wall {c_emb:8.2f} s CPU  = "
            f"{t_emb / t_floor:.2f} x floor wall, {c_emb / c_floor:.2f} x floor CPU "
            f"(target <= 1.5); load average {os.getloadavg()[0]:.1f}"
        )
    if not args.no_dask:
        runs = [dask_run(events, kw, args.workers, args.write) for _ in range(args.repeats)]
        t_dask, c_dask = min(r[0] for r in runs), min(r[1] for r in runs)
        rss = max(max(r[2]) for r in runs)
        each = ", ".join(f"{m:.0f}" for m in runs[-1][2])
        ratio = (
            f"throughput {t_emb / t_dask:.2f} x embedded wall, {c_emb / c_dask:.2f} x "
            "embedded CPU (target >= 1.5 wall, idle); "
            if t_emb < float("inf")
            else ""
        )
        meter = runs[-1][3]
        print(
            f"dask {args.workers} workers:         {t_dask:8.2f} s wall {c_dask:8.2f} s CPU "
            f"(client, scheduler and workers)  {ratio}worker peak RSS {rss:.0f} MiB "
            f"(each: {each}); load average {os.getloadavg()[0]:.1f}"
        )
        print(
            f"dask client: peak RSS {meter.peak / 2**20:.0f} MiB (at the start "
            f"{meter.baseline / 2**20:.0f} MiB); sent to the cluster "
            f"{meter.sent / 2**20:.1f} MiB (task arguments, graphs, scattered data); "
            f"events {'read by the workers from Parquet' if args.from_file else 'in memory'}"
        )
    if args.spark:
        t_spark = min(spark_run(events, kw, args.workers, args.write) for _ in range(args.repeats))
        versus = (
            "" if args.no_dask else f" = {t_spark / t_dask:.2f} x the Dask time (target <= 1.5)"
        )
        print(
            f"spark local[{args.workers}]:        {t_spark:8.2f} s wall{versus}; load average "
            f"{os.getloadavg()[0]:.1f}"
        )


if __name__ == "__main__":
    main()
