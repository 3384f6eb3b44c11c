"""A job that dies because a file it was given is not there reads ``workload.file_not_found``
whichever library reported it: Python's own ``[Errno 2] No such file or directory: '…'``,
Arrow's ``Failed to open local file`` (pyarrow and the Hugging Face datasets cache on top of
it) or Hugging Face datasets' ``Unable to find '…'``, which also end in a generic exception
line. One whose command-line override Hydra rejected, with no traceback at all, reads
``workload.bad_arguments``. Landed through the Slurm connector and the files landing,
attributed by a run."""

from __future__ import annotations

from datetime import date

import pytest

from tests.end_to_end import ALIVE, ITERATION, syslog, verdicts_by_job

# https://github.com/ray-project/ray/issues/43282
ARROW = ("FileNotFoundError: [Errno 2] Failed to open local file '/home/jovyan/.cache/huggingface/datasets/csv/"
         "default-f41220f1f9944b95/0.0.0/eea64c71ca8b46dd3f537ed218fc9bf495d5707789152eb2764f5c78fa66d59d/csv-train.arrow'. "
         "Detail: [errno 2] No such file or directory")
# https://github.com/apache/arrow/issues/3335 (pyarrow before 0.17)
OLD_ARROW = "ArrowIOError: Failed to open local file: does_not_exist.feather , error: No such file or directory"
# https://github.com/NVIDIA/Megatron-LM/issues/185
PYTHON = ("FileNotFoundError: [Errno 2] No such file or directory: "
          "'checkpoints/gpt2_345m/iter_0006000/mp_rank_00/model_optim_rng.pt'")
# https://github.com/huggingface/datasets/issues/6073
DATASETS = "FileNotFoundError: Unable to find '/a/b/c/.d/train/train.jsonl' at /a/b/c/.d/"
# Hydra's message for an override of a key the config lacks (facebookresearch/hydra#1912),
# and its trailer (#947)
HYDRA = [
    "Could not override 'perferences.trait'.",
    "To append to your config use +perferences.trait=i_like_stars",
    "Key 'perferences' is not in struct",
    "    full_key: perferences",
    "    object_type=dict",
    "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.",
]
# https://github.com/huggingface/accelerate/issues/2960 (srun's report of the tasks that failed)
SRUN_EXIT = "srun: error: g5: tasks 0-7: Exited with exit code 1"
# https://github.com/open-mmlab/mmsegmentation/issues/3106 (torchrun's summary of the failed worker)
CHILD_FAILED = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:"

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
901|901|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g1|gres/gpu=8,node=1
902|902|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g2|gres/gpu=8,node=1
903|903|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g3|gres/gpu=8,node=1
904|904|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g4|gres/gpu=8,node=1
905|905|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g5|gres/gpu=8,node=1
"""
ERRORS = {"901": ARROW, "902": OLD_ARROW, "903": PYTHON, "904": DATASETS}


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("missing_file")
    logs = root / "logs"
    logs.mkdir()
    for index, (job, error) in enumerate(ERRORS.items(), start=1):
        (logs / f"g{index}.log").write_text(syslog(f"g{index}", ("10:05:00", ALIVE), ("10:25:00", ALIVE)))
        # Every rank of the one-node job (torchrun --tee) prints the traceback.
        ranks = "".join(
            f'[default{r}]:Traceback (most recent call last):\n[default{r}]:  File "train.py", line 88, in <module>\n'
            f"[default{r}]:{error}\n" for r in range(8)
        )
        (logs / f"slurm-{job}.out").write_text(f"[2026-11-20 10:20:20,000] {ITERATION}\n{ranks}{CHILD_FAILED}\n")
    # srun --label, one task per GPU: every task prints Hydra's message and exits 1.
    (logs / "g5.log").write_text(syslog("g5", ("10:05:00", ALIVE), ("10:25:00", ALIVE)))
    (logs / "slurm-905.out").write_text(
        "".join(f"{task}: {line}\n" for task in range(8) for line in HYDRA) + f"{SRUN_EXIT}\n"
    )
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


@pytest.mark.parametrize("job", sorted(ERRORS))
def test_a_missing_file_is_the_workloads_whichever_library_reported_it(verdicts, job):
    v = verdicts[job]
    assert (v["domain"], v["cause"], v["quality"]) == ("workload", "workload.file_not_found", "definitive")
    assert v["culprit_nodes"] == [] and v["recommended_action"] == "fix_workload"


def test_an_override_hydra_rejects_is_a_bad_argument(verdicts):
    v = verdicts["905"]
    assert (v["domain"], v["cause"], v["quality"]) == ("workload", "workload.bad_arguments", "definitive")
    assert v["culprit_nodes"] == [] and v["recommended_action"] == "fix_workload"
