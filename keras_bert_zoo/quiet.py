"""One place that keeps the command line's output to what the user asked for.

TensorFlow prints start-up lines from C++ (oneDNN, CUDA stubs, CPU features, XLA
service) straight to file descriptor 2, some of them before its logging starts, so
`TF_CPP_MIN_LOG_LEVEL` alone cannot stop them. `quiet_command_line()` sets that
variable (when the user has not), and routes descriptor 2 through a filter that drops
exactly those known lines and passes everything else through unchanged. Keras
warnings whose cause we cannot remove are ignored by message here too. The library
itself never calls this: only the `bert-zoo` command does (a user's own script keeps
TensorFlow's defaults).
"""

import atexit
import os
import re
import sys
import threading
import warnings

__all__ = ["TF_NOISE", "quiet_command_line"]

# Start-up and environment lines of TensorFlow/XLA/absl that say nothing about the run.
TF_NOISE = re.compile(
    r"All log messages before absl::InitializeLog|oneDNN custom operations are on|cudart_stub\.cc|"
    r"cpu_feature_guard\.cc|^To enable the following instructions|cuda_platform\.cc.*cuInit|"
    r"Unable to register cu(DNN|FFT|BLAS) factory|computation_placer|TF-TRT Warning|"
    r"oneDNN supports DT_INT64 only|XLA service 0x|StreamExecutor \[\d+\]|Compiled cluster using XLA|Ignoring Assert operator"
)

_started = False


def quiet_command_line():
    """Silences TensorFlow's start-up chatter for the rest of this process (idempotent)."""
    global _started
    if _started:
        return
    _started = True
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # Keras logs "`shuffle=True` was passed, but will be ignored" for datasets; we
    # pass shuffle=False, but a user's callback or a library path may not.
    warnings.filterwarnings("ignore", message=r"`shuffle=True` was passed, but will be ignored")
    if os.environ.get("BERT_ZOO_RAW_STDERR"):  # debugging: see everything
        return
    _filter_stderr()


def _filter_stderr():
    try:
        real = os.dup(2)
        read_end, write_end = os.pipe()
    except OSError:  # no descriptor 2 (some embedded interpreters): nothing to filter
        return
    os.dup2(write_end, 2)
    os.close(write_end)
    sys.stderr.flush()

    def pump():
        with os.fdopen(read_end, "rb") as source, os.fdopen(real, "wb", buffering=0) as sink:
            for line in source:
                if not TF_NOISE.search(line.decode("utf-8", "replace")):
                    sink.write(line)

    thread = threading.Thread(target=pump, name="bert-zoo-stderr-filter", daemon=True)
    thread.start()

    def drain():
        # Close our end of the pipe so the pump sees end-of-file, then let it finish.
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
        thread.join(timeout=5)

    atexit.register(drain)
