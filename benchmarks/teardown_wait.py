"""tf.data autotuning and the iterator's teardown: the wait `bucketing.finish_in_memory` removes.

`predict` of MiniLM (`BertClassifier`) on the SST-2 dev sentences through our sorted
batches (`batch_raw_sorted`), with autotuning on and off, rounds interleaved: the whole
call timed, and the seconds between the last batch and the call's return. (A plain
`tf.data` pipeline consumed at a fixed pace showed the wait once in nine one-off tries
and never in this benchmark's first record, so it is no longer measured here.)

    python benchmarks/teardown_wait.py --rounds 6

Writes `benchmarks/results/teardown_wait.json` and prints the medians and maxima.
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

DEV = os.path.join(os.path.dirname(common.REPO), "shared", "data", "sst2", "dev.tsv")


def with_autotune(ds, enabled):
    import tensorflow as tf

    options = tf.data.Options()
    options.autotune.enabled = enabled
    return ds.with_options(options)


def predict_times(rounds):
    import keras

    from keras_bert_zoo import BertClassifier, BertPreprocessor
    from keras_bert_zoo.preprocessing.batching import batch_raw_sorted
    from keras_bert_zoo.preprocessing.task_data import DataLayout, read_examples

    texts = list(read_examples(DEV, DataLayout.for_task("sst2")).texts[0])
    minilm = common.minilm_path()
    model = BertClassifier.from_preset(minilm, num_classes=2,
                                       preprocessor=BertPreprocessor.from_preset(minilm, sequence_length=128))
    model.compile()

    class LastBatch(keras.callbacks.Callback):
        def on_predict_end(self, logs=None):
            self.at = time.perf_counter()

    def one(enabled):
        ds, _ = batch_raw_sorted(model.preprocessor, texts, batch_size=64)
        ds, last = with_autotune(ds, enabled), LastBatch()
        t = time.perf_counter()
        keras.Model.predict(model, ds, verbose=0, callbacks=[last])
        end = time.perf_counter()
        return end - t, end - last.at

    one(True)  # trace and warm up
    out = {True: [], False: []}
    for _ in range(rounds):
        for enabled in (True, False):
            out[enabled].append(one(enabled))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--out", default=os.path.join(common.REPO, "benchmarks", "results", "teardown_wait.json"))
    args = parser.parse_args(argv)
    started, machine = common.now(), common.machine_line()
    predict = predict_times(args.rounds)
    summary = {}
    for enabled in (True, False):
        name = "autotune_on" if enabled else "autotune_off"
        summary[name] = dict(
            predict_s=[round(v[0], 2) for v in predict[enabled]],
            predict_after_last_batch_s=[round(v[1], 2) for v in predict[enabled]],
            predict_median_s=round(statistics.median(v[0] for v in predict[enabled]), 2),
            predict_max_s=round(max(v[0] for v in predict[enabled]), 2))
        print(f"{name}: predict median "
              f"{summary[name]['predict_median_s']} s, max {summary[name]['predict_max_s']} s, after the last batch "
              f"{summary[name]['predict_after_last_batch_s']}", flush=True)
    record = dict(command="python benchmarks/teardown_wait.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                  started=started, finished=common.now(), machine_before=machine, machine_after=common.machine_line(),
                  commit=common.git_commit(), versions=common.versions("tensorflow", "keras"), rounds=args.rounds,
                  summary=summary)
    common.write_json(args.out, record)


if __name__ == "__main__":
    main()
