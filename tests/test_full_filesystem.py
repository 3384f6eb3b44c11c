"""A checkpoint that could not be written because its filesystem was full reads
``storage.disk_full``: torch.save's "file write failed" hides the errno, the ``[Errno 28]``
the same save raised beside it names it. An object store (S3, Google Cloud Storage) that
throttled or failed the job's requests, or stopped answering them, is storage and names no
node. Real lines, landed through the Slurm connector and the files landing, attributed by a
run."""

from __future__ import annotations

from datetime import date

from tests.end_to_end import ALIVE, CUDA_OOM, ITERATION, syslog, verdicts_by_job

# https://github.com/SWivid/F5-TTS/issues/458
WRITE_FAILED = ("[rank0]: RuntimeError: [enforce fail at inline_container.cc:778] . PytorchStreamWriter failed "
                "writing file data.pkl: file write failed")
# https://github.com/babysor/MockingBird/issues/774
ENOSPC = "OSError: [Errno 28] No space left on device"

SACCT = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
630|630|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|f1|gres/gpu=8,node=1
"""


def test_the_full_filesystem_behind_a_failed_checkpoint_write_is_the_root(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "f1.log").write_text(syslog("f1", ("10:05:00", ALIVE), ("10:25:00", ALIVE)))
    (logs / "slurm-630.out").write_text(
        f"[2026-11-20 10:20:00,000] {ITERATION}\n{WRITE_FAILED}\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        f"[rank0]: Traceback (most recent call last):\n[rank0]: {ENOSPC}\n"
    )
    v = verdicts_by_job(tmp_path, SACCT, logs, date(2026, 11, 20))["630"]
    assert (v["domain"], v["cause"], v["quality"]) == ("storage", "storage.disk_full", "definitive")


# https://github.com/ray-project/deltacat/issues/51 (botocore's ClientError, the SDK's retries spent)
SLOW_DOWN = ("[rank16]: botocore.exceptions.ClientError: An error occurred (SlowDown) when calling the PutObject "
             "operation (reached max retries: 4): Please reduce your request rate.")
# CPython's OSError for a rename on a node's own NVMe scratch (Objects/exceptions.c)
LOCAL_NVME_FULL = ("[rank8]: OSError: [Errno 28] No space left on device: '/local_nvme/stage/ckpt-3000/rank8.distcp' "
                   "-> '/local_nvme/stage/ckpt-3000/rank8.distcp.tmp'")

TWO_JOBS = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
631|631|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|f1|gres/gpu=8,node=1
632|632|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|f2|gres/gpu=8,node=1
"""


def test_a_throttling_object_store_is_storage_and_a_full_node_disk_names_its_node(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for node in ("f1", "f2"):
        (logs / f"{node}.log").write_text(syslog(node, ("10:05:00", ALIVE), ("10:25:00", ALIVE)))
    (logs / "slurm-631.out").write_text(f"[2026-11-20 10:20:00,000] {ITERATION}\n{SLOW_DOWN}\n")
    (logs / "slurm-632.out").write_text(f"[2026-11-20 10:20:00,000] {ITERATION}\n{LOCAL_NVME_FULL}\n")
    v = verdicts_by_job(tmp_path, TWO_JOBS, logs, date(2026, 11, 20))
    # The same line matches the generic exception rule: the store's refusal outranks it.
    assert (v["631"]["domain"], v["631"]["cause"], v["631"]["culprit_nodes"]) == (
        "storage", "storage.object_store_throttled", [])
    assert (v["632"]["domain"], v["632"]["cause"], v["632"]["culprit_nodes"]) == ("storage", "storage.disk_full", ["f2"])


# https://github.com/googleapis/google-cloud-python/issues/10574 (google-api-core's exception
# for the status), inside PyTorch's re-raise of a DataLoader worker's failure
# (torch/_utils.py ExceptionWrapper); https://github.com/ThetaTau/CMT/issues/957 (a 429 whose
# JSON body follows on the next lines); https://github.com/piskvorky/smart_open/issues/312
# (botocore giving up on the endpoint).
GCS_503 = ("[rank4]: google.api_core.exceptions.ServiceUnavailable: 503 POST https://storage.googleapis.com/storage/v1/b/"
           "doc_corpus/o/receipts%2Freceipts%2F1087-receipt.jpg/copyTo/b/doc_corpus/o/receipts%2F1087-receipt%2F")
GCS_429 = ("[rank0]: TooManyRequests: 429 POST https://storage.googleapis.com/upload/storage/v1/b/theta-tau/o?"
           "uploadType=multipart&predefinedAcl=publicRead: {\n[rank0]:   \"error\": {\n[rank0]:     \"code\": 429,\n"
           "[rank0]:   }\n[rank0]: }")
READ_TIMEOUT = '[rank3]: botocore.exceptions.ReadTimeoutError: Read timeout on endpoint URL: "None"'

STORES = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
633|633|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|f1|gres/gpu=8,node=1
634|634|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|f2|gres/gpu=8,node=1
635|635|train|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|f3|gres/gpu=8,node=1
636|636|train|alice|FAILED|1:0|2026-11-20T09:00:00|2026-11-20T10:30:00|f4|gres/gpu=8,node=1
"""


def test_cloud_object_stores_that_failed_or_throttled_are_storage_and_name_no_node(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "slurm-633.out").write_text(
        f"[2026-11-20 10:20:00,000] {ITERATION}\n"
        "[rank4]: RuntimeError: Caught ServiceUnavailable in DataLoader worker process 2.\n"
        f"[rank4]: Original Traceback (most recent call last):\n{GCS_503}\n")
    (logs / "slurm-634.out").write_text(f"[2026-11-20 10:20:00,000] {ITERATION}\n{GCS_429}\n")
    (logs / "slurm-635.out").write_text(f"[2026-11-20 10:20:00,000] {ITERATION}\n{READ_TIMEOUT}\n")
    # 636 caught a checkpoint upload's timeout at 09:30 (logged with its stamp), retried,
    # trained on, and ran out of GPU memory an hour later: the store's hiccup passed.
    (logs / "slurm-636.out").write_text(
        f"[2026-11-20 09:29:00,000] {ITERATION}\n[2026-11-20 09:30:00,000][ckpt][WARNING] - upload failed, retrying: "
        f"{READ_TIMEOUT.removeprefix('[rank3]: ')}\n[2026-11-20 10:29:00,000] {CUDA_OOM}\n")
    v = verdicts_by_job(tmp_path, STORES, logs, date(2026, 11, 20))
    assert (v["633"]["domain"], v["633"]["cause"], v["633"]["culprit_nodes"]) == (
        "storage", "storage.object_store_unavailable", [])
    assert (v["634"]["domain"], v["634"]["cause"]) == ("storage", "storage.object_store_throttled")
    assert (v["635"]["domain"], v["635"]["cause"], v["635"]["culprit_nodes"]) == (
        "storage", "storage.object_store_unavailable", [])
    assert (v["636"]["domain"], v["636"]["cause"]) == ("workload", "workload.cuda_oom")


# https://github.com/TUVIMEN/stackexchange-scraper (the kernel's warning when a directory's
# hashed index cannot grow: every create in it fails with ENOSPC)
INDEX_FULL = ("kernel: EXT4-fs warning (device nvme0n1p1): ext4_dx_add_entry:2516: Directory (ino: 89391105) index "
              "full, reach max htree level :2")

INDEX = """JobID|JobIDRaw|JobName|User|State|ExitCode|Start|End|NodeList|AllocTRES
636|636|prep|alice|FAILED|1:0|2026-11-20T10:00:00|2026-11-20T10:30:00|f[1-2]|gres/gpu=16,node=2
"""


def test_a_bare_enospc_beside_the_nodes_own_full_directory_index_names_that_node(tmp_path):
    """The OSError names no path, so alone it names no node (the path may be a shared
    scratch); f2's kernel said a directory of its own disk could take no more entries."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "f1.log").write_text(syslog("f1", ("10:05:00", ALIVE), ("10:25:00", ALIVE)))
    (logs / "f2.log").write_text(syslog("f2", ("10:05:00", ALIVE), ("10:19:40", INDEX_FULL), ("10:25:00", ALIVE)))
    (logs / "slurm-636.out").write_text(f"0: [2026-11-20 10:19:00,000] {ITERATION}\n1: [2026-11-20 10:20:00,000] {ENOSPC}\n")
    v = verdicts_by_job(tmp_path, INDEX, logs, date(2026, 11, 20))["636"]
    assert (v["domain"], v["cause"], v["culprit_nodes"]) == ("storage", "storage.disk_full", ["f2"])
