"""A job that dies because a file it was given is not there reads ``workload.file_not_found``
whichever library reported it: Python's own ``[Errno 2] No such file or directory: '…'``,
or Arrow's ``Failed to open local file`` (pyarrow and the Hugging Face datasets cache on top
of it), which also ends in a generic exception line. Landed through the Slurm connector and
the files landing, attributed by a run."""

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
# https://github.com/open-mmlab/mmsegmentation/issues/3106 (torchrun's summary of the failed worker)
CHILD_FAILED = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:"

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
901|901|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g1|gres/gpu=8,node=1
902|902|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g2|gres/gpu=8,node=1
903|903|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|g3|gres/gpu=8,node=1
"""
ERRORS = {"901": ARROW, "902": OLD_ARROW, "903": PYTHON}


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
    return verdicts_by_job(root, SACCT, logs, date(2026, 11, 20))


@pytest.mark.parametrize("job", sorted(ERRORS))
def test_a_missing_file_is_the_workloads_whichever_library_reported_it(verdicts, job):
    v = verdicts[job]
    assert (v["domain"], v["cause"], v["quality"]) == ("workload", "workload.file_not_found", "definitive")
    assert v["culprit_nodes"] == [] and v["recommended_action"] == "fix_workload"
