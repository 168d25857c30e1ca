"""Task options as data: one `TaskOption` table makes the flags, the checks and `finetune`'s keywords."""

import argparse

import pytest

from keras_bert_zoo.cli import main
from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.tasks import get_task, task_names
from keras_bert_zoo.tasks.options import BATCHINGS, TaskOption, add_option_flags, option_values, values_from_args

FINETUNABLE = task_names(finetunable=True)


@pytest.mark.parametrize("name", FINETUNABLE)
def test_every_option_is_a_flag_whose_default_is_the_options(name):
    """The parser made from the table gives each option its default, and `layout_from_args`
    builds the same layout as `finetune`'s keywords (`layout_from_options`) from the same values."""
    spec = get_task(name)
    parser = argparse.ArgumentParser()
    add_option_flags(parser, spec.options)
    args = parser.parse_args(["--glue", "sst2"] if name == "classify" else [])
    values = values_from_args(spec.options, args)
    assert set(values) == {option.name for option in spec.options}
    for option in spec.options:
        if option.name != "glue":
            assert values[option.name] == option.default, option.name
    options = {"glue": "sst2"} if name == "classify" else {}
    assert spec.layout_from_args(args) == spec.layout_from_options(None, **options)


@pytest.mark.parametrize("name", FINETUNABLE)
def test_every_batching_is_a_named_value_of_the_one_vocabulary(name):
    batchings = get_task(name).batchings
    assert batchings[0] == "auto" and "fixed" in batchings  # fixed: what a TPU run needs
    assert set(batchings) <= set(BATCHINGS), set(batchings) - set(BATCHINGS)


def test_a_range_is_checked_the_same_through_the_flag_and_the_keyword(capsys):
    qa = get_task("qa")
    with pytest.raises(
        UsageError,
        match=r"doc_stride \(`--doc-stride`\) of the qa task is 0, out of range; "
        r"use 1 to 8192\.",
    ):
        qa.layout_from_options(None, doc_stride=0)
    with pytest.raises(SystemExit) as exit_info:
        main(["finetune", "qa", "--model", "m", "--train", "t", "--dev", "d", "--out", "o", "--doc-stride", "0"])
    assert exit_info.value.code == 2
    assert "--doc-stride: 0 is out of range; use 1 to 8192" in capsys.readouterr().err


@pytest.mark.parametrize(
    "given, message",
    [
        ({"doc_strid": 64}, r"doc_strid is not an option of the qa task; its options are doc_stride, "),
        (
            {"stride_mode": "sideways"},
            r"stride_mode \(`--stride-mode`\) of the qa task is 'sideways'; use one of "
            r"'step', 'overlap'\.",
        ),
        ({"doc_stride": 12.5}, r"doc_stride .* is an integer, not 12.5\."),
        ({"version_2_with_negative": "yes"}, r"version_2_with_negative .* is True or False, not 'yes'\."),
        ({"null_threshold": float("nan")}, r"null_threshold .* is a number, not nan\."),
    ],
)
def test_a_bad_keyword_names_the_option_and_what_is_allowed(given, message):
    with pytest.raises(UsageError, match=message):
        get_task("qa").layout_from_options(None, **given)


def test_options_apply_to_a_given_layout_only_where_it_has_the_field():
    from keras_bert_zoo.tasks.span_qa.spec import QALayout

    qa = get_task("qa")
    assert qa.layout_from_options(QALayout(doc_stride=64), stride_mode="overlap") == QALayout(
        doc_stride=64, stride_mode="overlap"
    )
    classify = get_task("classify")
    from keras_bert_zoo.tasks.classifier.data import DataLayout

    with pytest.raises(UsageError, match=r"\['glue'\] cannot be applied to the layout given"):
        classify.layout_from_options(DataLayout.for_task("sst2"), glue="mrpc")


def test_classify_builds_a_layout_from_columns_and_refuses_half_of_one():
    classify = get_task("classify")
    layout = classify.layout_from_options(None, text_column=["0", "1"], label_column="2", header=False)
    assert (layout.text_columns, layout.label_column, layout.header) == ((0, 1), 2, False)
    with pytest.raises(UsageError, match="give --glue .* or both --text-column and --label-column"):
        classify.layout_from_options(None, text_column=["sentence"])


def test_a_negated_flag_stores_false():
    header = TaskOption("header", bool, True, "files have no header row", flag="--no-header")
    parser = argparse.ArgumentParser()
    add_option_flags(parser, (header,))
    assert parser.parse_args([]).header is True and parser.parse_args(["--no-header"]).header is False
    assert option_values((header,), "classify", {}) == {"header": True}
