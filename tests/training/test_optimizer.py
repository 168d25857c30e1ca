"""create_optimizer against references we did not write: torch.optim.AdamW driven by
transformers' get_linear_schedule_with_warmup and clip_grad_norm_ (the `linear` recipe),
and google-research/bert optimization.py's schedule and AdamWeightDecayOptimizer,
written out here in numpy (the `bert_original` recipe)."""

import json
import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_bert_zoo import BertClassifier
from keras_bert_zoo.training import LinearWarmupLinearDecay, create_optimizer
from keras_bert_zoo.training.optimizer import BertAdamW
from tests.helpers import REPO_ROOT


def optimization_py_learning_rate(global_step, init_lr, num_train_steps, num_warmup_steps):
    """google-research/bert optimization.py `create_optimizer`, in plain Python."""
    # tf.train.polynomial_decay(init_lr, global_step, num_train_steps,
    #                           end_learning_rate=0.0, power=1.0, cycle=False)
    end_learning_rate, power = 0.0, 1.0
    step = min(global_step, num_train_steps)
    learning_rate = (init_lr - end_learning_rate) * (1 - step / num_train_steps) ** power + end_learning_rate
    if num_warmup_steps:
        warmup_learning_rate = init_lr * (global_step / num_warmup_steps)
        is_warmup = float(global_step < num_warmup_steps)
        learning_rate = (1.0 - is_warmup) * learning_rate + is_warmup * warmup_learning_rate
    return learning_rate


@pytest.mark.parametrize("total,warm", [(100, 10), (40, 0), (37, 7), (10, 10)])
def test_bert_original_schedule_matches_optimization_py(total, warm):
    from keras_bert_zoo.training import BertOriginalWarmupDecay

    peak = 1e-4
    schedule = BertOriginalWarmupDecay(peak, total_steps=total, warmup_steps=warm)
    for step in range(total + 5):
        expected = optimization_py_learning_rate(step, peak, total, warm)
        assert float(schedule(step)) == pytest.approx(expected, rel=1e-6, abs=1e-12), step
    # The two formulas differ after warm-up: the original decays from step 0.
    if warm:
        assert float(schedule(warm)) == pytest.approx(peak * (1 - warm / total), rel=1e-6)
    config = schedule.get_config()
    assert float(BertOriginalWarmupDecay(**config)(total // 2)) == float(schedule(total // 2))
    via_optimizer = create_optimizer(peak, total_steps=total, warmup_steps=warm, schedule="bert_original")
    assert isinstance(via_optimizer.learning_rate_schedule, BertOriginalWarmupDecay)


@pytest.mark.parametrize("total,warm", [(40, 7), (100, 10), (25, 0), (12, 12)])
def test_linear_schedule_matches_transformers(total, warm):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=3e-4)
    sched = transformers.get_linear_schedule_with_warmup(opt, num_warmup_steps=warm, num_training_steps=total)
    ours = LinearWarmupLinearDecay(3e-4, total_steps=total, warmup_steps=warm)
    for step in range(total + 5):
        assert float(ours(step)) == pytest.approx(opt.param_groups[0]["lr"], rel=1e-5, abs=1e-12), step
        opt.step()
        sched.step()
    assert float(LinearWarmupLinearDecay(**ours.get_config())(total // 2)) == float(ours(total // 2))


@pytest.mark.parametrize("fused_update", [True, False])
def test_adamw_steps_match_torch_with_clipping_and_decay_exclusions(fused_update):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    rng = np.random.default_rng(0)
    shapes = {"dense/kernel": (4, 3), "dense/bias": (3,), "LayerNorm/gamma": (3,), "word_embeddings/embeddings": (5, 3)}
    init = {k: rng.normal(size=s).astype("float32") for k, s in shapes.items()}
    steps, warm, lr = 12, 3, 1e-2
    grads = [
        {k: (rng.normal(size=s) * (3.0 if t % 2 else 0.1)).astype("float32") for k, s in shapes.items()}
        for t in range(steps)
    ]  # odd steps have global norm > 1: clipping matters

    # Ours (Keras). Variable names as in our layers: kernel, bias, gamma, embeddings.
    variables = {k: keras.Variable(v, name=k.split("/")[1]) for k, v in init.items()}
    optimizer = create_optimizer(lr, total_steps=steps, warmup_steps=warm, fused_update=fused_update)
    for g in grads:
        optimizer.apply_gradients([(g[k], variables[k]) for k in shapes])

    def torch_reference(clip=True, exclude=True):
        # torch AdamW, decay 0.01 except on biases and LayerNorm (HF's recipe).
        params = {k: torch.nn.Parameter(torch.tensor(v)) for k, v in init.items()}
        no_decay = ["dense/bias", "LayerNorm/gamma"] if exclude else []
        ref = torch.optim.AdamW(
            [
                {"params": [params[k] for k in shapes if k not in no_decay], "weight_decay": 0.01},
                {"params": [params[k] for k in no_decay], "weight_decay": 0.0},
            ],
            lr=lr,
            betas=(0.9, 0.999),
            eps=1e-6,
        )
        sched = transformers.get_linear_schedule_with_warmup(ref, num_warmup_steps=warm, num_training_steps=steps)
        for g in grads:
            for k in shapes:
                params[k].grad = torch.tensor(g[k])
            if clip:
                torch.nn.utils.clip_grad_norm_(list(params.values()), 1.0)
            ref.step()
            sched.step()
        return {k: p.detach().numpy() for k, p in params.items()}

    def max_diff(ref):
        return max(float(np.abs(variables[k].numpy() - ref[k]).max()) for k in shapes)

    # Float32 rounding only, against weight moves of ~1e-1. (Keras' own AdamW, which
    # adds epsilon before the bias correction, differs here by a few 1e-6.)
    assert max_diff(torch_reference()) < 1e-6
    # The tolerance is sharp enough to see each ingredient of the recipe.
    assert max_diff(torch_reference(clip=False)) > 1e-3
    assert max_diff(torch_reference(exclude=False)) > 1e-4


def adam_weight_decay_optimizer_reference(init, grads, init_lr, num_train_steps, num_warmup_steps):
    """optimization.py, in numpy: the schedule above, `tf.clip_by_global_norm(grads, 1.0)`,
    then AdamWeightDecayOptimizer (no bias correction; decoupled decay `wd * param`
    added to the update; the learning rate multiplies both)."""
    weight_decay_rate, beta_1, beta_2, epsilon = 0.01, 0.9, 0.999, 1e-6
    exclude_from_weight_decay = ["LayerNorm", "layer_norm", "bias"]
    params = {k: v.astype("float64") for k, v in init.items()}
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(p) for k, p in params.items()}
    for global_step, grad in enumerate(grads):
        learning_rate = optimization_py_learning_rate(global_step, init_lr, num_train_steps, num_warmup_steps)
        global_norm = np.sqrt(sum(float(np.sum(np.square(g.astype("float64")))) for g in grad.values()))
        clip = 1.0 / max(global_norm, 1.0)
        for name, param in params.items():
            g = grad[name].astype("float64") * clip
            m[name] = beta_1 * m[name] + (1.0 - beta_1) * g
            v[name] = beta_2 * v[name] + (1.0 - beta_2) * np.square(g)
            update = m[name] / (np.sqrt(v[name]) + epsilon)
            if not any(re.search(r, name) for r in exclude_from_weight_decay):
                update += weight_decay_rate * param
            params[name] = param - learning_rate * update
    return params


def test_bert_original_recipe_matches_adam_weight_decay_optimizer():
    rng = np.random.default_rng(1)
    shapes = {
        "dense/kernel": (4, 3),
        "dense/bias": (3,),
        "LayerNorm/gamma": (3,),
        "LayerNorm/beta": (3,),
        "word_embeddings/embeddings": (5, 3),
    }
    init = {k: rng.normal(size=s).astype("float32") for k, s in shapes.items()}
    steps, warm, lr = 10, 3, 1e-2
    grads = [
        {k: (rng.normal(size=s) * (3.0 if t % 2 else 0.1)).astype("float32") for k, s in shapes.items()}
        for t in range(steps)
    ]  # odd steps have global norm > 1: clipping matters

    def ours(**kwargs):
        variables = {k: keras.Variable(v, name=k.split("/")[1]) for k, v in init.items()}
        optimizer = create_optimizer(lr, total_steps=steps, warmup_steps=warm, **kwargs)
        for g in grads:
            optimizer.apply_gradients([(g[k], variables[k]) for k in shapes])
        return {k: variables[k].numpy() for k in shapes}

    reference = adam_weight_decay_optimizer_reference(init, grads, lr, steps, warm)

    def max_diff(result):
        return max(float(np.abs(result[k] - reference[k]).max()) for k in shapes)

    assert max(float(np.abs(reference[k] - init[k]).max()) for k in shapes) > 1e-2
    # The element-wise update: float32 rounding only.
    assert max_diff(ours(recipe="bert_original", fused_update=False)) < 1e-6
    assert max_diff(ours(schedule="bert_original", bias_correction=False, fused_update=False)) < 1e-6
    # TF's fused Adam kernel (the default) forms 1 - beta_2 from float32 0.999
    # (0.00099998713 instead of 0.001): a few 1e-6 here, as `BertAdamW` documents.
    assert max_diff(ours(recipe="bert_original")) < 4e-6
    # Each ingredient is visible at this tolerance.
    assert max_diff(ours(schedule="bert_original")) > 1e-3  # Keras' bias-corrected Adam
    assert max_diff(ours(recipe="bert_original", schedule="linear")) > 1e-4  # HF's schedule
    assert max_diff(ours(recipe="bert_original", clipnorm=None)) > 1e-4


def test_optimizer_and_schedule_serialize(tmp_path):
    from keras_bert_zoo.training import BertAdamW, BertOriginalWarmupDecay

    optimizer = create_optimizer(1e-3, total_steps=20, warmup_steps=0, recipe="bert_original")
    assert optimizer.bias_correction is False
    assert isinstance(optimizer.learning_rate_schedule, BertOriginalWarmupDecay)
    restored = BertAdamW.from_config(optimizer.get_config())
    assert restored.get_config() == optimizer.get_config()

    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.LayerNormalization()(keras.layers.Dense(2)(inputs)))
    model.compile(optimizer=optimizer, loss="mse")
    path = str(tmp_path / "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path).optimizer
    assert isinstance(loaded, BertAdamW) and loaded.get_config() == optimizer.get_config()
    assert isinstance(loaded.learning_rate_schedule, BertOriginalWarmupDecay)
    assert float(loaded.learning_rate_schedule(7)) == float(optimizer.learning_rate_schedule(7))


def test_weight_decay_exclusions_survive_serialization(tmp_path):
    """Keras' `exclude_from_weight_decay` is not part of an optimizer's config: a
    restored optimizer must still spare LayerNorm weights and biases."""

    def decayed(optimizer, variables):
        # With a zero gradient only the weight decay moves a variable.
        for v in variables:
            v.assign(np.ones(v.shape, "float32"))
        optimizer.apply_gradients([(np.zeros(v.shape, "float32"), v) for v in variables])
        return {v.name: not np.all(v.numpy() == 1.0) for v in variables}

    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.LayerNormalization()(keras.layers.Dense(2)(inputs)))
    optimizer = create_optimizer(1e-3, total_steps=20, warmup_steps=0)
    model.compile(optimizer=optimizer, loss="mse")
    model.save(str(tmp_path / "model.keras"))
    loaded = keras.saving.load_model(str(tmp_path / "model.keras"))
    expected = {"kernel": True, "bias": False, "gamma": False, "beta": False}
    assert decayed(loaded.optimizer, loaded.trainable_variables) == expected
    fresh = [keras.Variable(np.ones(2, "float32"), name=name) for name in expected]
    assert decayed(type(optimizer).from_config(optimizer.get_config()), fresh) == expected


def test_optimizer_constants():
    opt = create_optimizer(5e-5, total_steps=100)
    assert opt.epsilon == 1e-6 and opt.weight_decay == 0.01 and opt.global_clipnorm == 1.0
    assert opt.beta_1 == 0.9 and opt.beta_2 == 0.999
    assert opt.bias_correction is True  # `linear` recipe: Keras'/torch's Adam and HF's schedule
    assert isinstance(opt.learning_rate_schedule, LinearWarmupLinearDecay)
    assert float(opt.learning_rate) == 0.0  # warm-up starts at zero
    with pytest.raises(ValueError, match="warmup_steps"):
        create_optimizer(5e-5, total_steps=10, warmup_steps=20)
    with pytest.raises(ValueError, match="bert_original"):
        create_optimizer(5e-5, total_steps=10, schedule="cosine")
    with pytest.raises(ValueError, match="bert_original"):
        create_optimizer(5e-5, total_steps=10, recipe="bert")


def test_epsilon_is_added_after_bias_correction_as_in_torch():
    # Gradients of 1e-6, the size of a rare embedding row's: epsilon (1e-6) is then
    # half the denominator, and where it is added decides the step. Keras' own AdamW
    # adds it to the uncorrected sqrt(v), in effect 1/sqrt(1 - 0.999^t) (30x at
    # t = 1) larger: its first steps are a fraction of torch's.
    torch = pytest.importorskip("torch")
    grads = [np.full((3,), 1e-6 * (1 + t % 3), "float32") for t in range(20)]

    def run_keras(optimizer):
        variable = keras.Variable(np.zeros(3, "float32"), name="kernel")
        for g in grads:
            optimizer.apply_gradients([(g, variable)])
        return variable.numpy()

    param = torch.nn.Parameter(torch.zeros(3))
    reference = torch.optim.AdamW([param], lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0)
    for g in grads:
        param.grad = torch.tensor(g)
        reference.step()
    expected = param.detach().numpy()

    ours = run_keras(BertAdamW(learning_rate=1e-3, weight_decay=0.0, epsilon=1e-6))
    keras_own = run_keras(keras.optimizers.AdamW(learning_rate=1e-3, weight_decay=0.0, epsilon=1e-6))
    np.testing.assert_allclose(ours, expected, rtol=1e-5)
    assert np.abs(keras_own - expected).max() > 0.3 * np.abs(expected).max()


@pytest.mark.parametrize("recipe", ["create_optimizer", "compile_auto"])
def test_embedding_lookup_with_repeated_ids_steps_like_torch(recipe):
    """An embedding lookup's gradient in TensorFlow is sparse, one row per occurrence of
    an id; torch's is dense, one row per id. Ids repeated within a batch (every batch's
    `[CLS]`, `[SEP]`, padding, common words) must still step as torch's AdamW with
    clipping does: the repeated rows are summed before Adam's moments and before the
    global norm. Without that merge the tables differ by 7e-4 here (Adam's second moment
    gets a sum of squares instead of a squared sum). Both BERT's recipe and the optimizer of
    a task's `compile(optimizer="auto")` (Keras AdamW's settings, constant rate, no clipping)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import tensorflow as tf

    rng = np.random.default_rng(0)
    table, kernel = rng.normal(size=(6, 4)).astype("float32"), rng.normal(size=(4, 1)).astype("float32")
    batches = [rng.choice([0, 0, 0, 1, 2, 5], size=(3, 5)).astype("int32") for _ in range(6)]  # id 0 repeats
    targets = [rng.normal(size=(3, 5, 1)).astype("float32") * 5 for _ in batches]  # norms > 1: clipping on
    steps, lr = len(batches), 1e-2

    embeddings = keras.Variable(table, name="embeddings")
    dense = keras.Variable(kernel, name="kernel")
    if recipe == "create_optimizer":
        optimizer, decay, eps, clip = create_optimizer(lr, total_steps=steps, warmup_steps=1), 0.01, 1e-6, True
    else:
        optimizer, decay, eps, clip = BertClassifier(_tiny_backbone(), num_classes=2), 0.004, 1e-7, False
        optimizer.compile()  # optimizer="auto"
        optimizer = optimizer.optimizer
        optimizer.learning_rate = lr
    for ids, target in zip(batches, targets, strict=True):
        with tf.GradientTape() as tape:
            out = tf.matmul(tf.gather(embeddings.value, ids), dense.value)  # a lookup: sparse gradient
            loss = tf.reduce_mean(tf.square(out - target))
        grads = tape.gradient(loss, [embeddings.value, dense.value])
        assert isinstance(grads[0], tf.IndexedSlices)
        optimizer.apply_gradients(zip(grads, [embeddings, dense], strict=True))

    emb, lin = torch.nn.Parameter(torch.tensor(table)), torch.nn.Parameter(torch.tensor(kernel))
    ref = torch.optim.AdamW([emb, lin], lr=lr, eps=eps, weight_decay=decay)
    schedule = transformers.get_linear_schedule_with_warmup(ref, 1, steps) if clip else None
    for ids, target in zip(batches, targets, strict=True):
        loss = ((torch.nn.functional.embedding(torch.tensor(ids).long(), emb) @ lin - torch.tensor(target)) ** 2).mean()
        loss.backward()
        if clip:
            torch.nn.utils.clip_grad_norm_([emb, lin], 1.0)
        ref.step()
        if schedule:
            schedule.step()
        ref.zero_grad()
    assert np.abs(embeddings.numpy() - table).max() > 1e-2  # the rows moved...
    np.testing.assert_allclose(embeddings.numpy(), emb.detach().numpy(), rtol=1e-5, atol=2e-6)  # ...as torch's
    np.testing.assert_allclose(dense.numpy(), lin.detach().numpy(), rtol=1e-5, atol=2e-6)


def _tiny_backbone():
    from keras_bert_zoo import BertBackbone

    return BertBackbone(vocabulary_size=20, num_layers=1, num_heads=1, hidden_dim=4, intermediate_dim=8)


@pytest.mark.parametrize("rate", [0.0, -1e-4, float("nan")])
def test_a_learning_rate_that_is_not_positive_is_refused(rate):
    with pytest.raises(ValueError, match="peak learning rate must be a positive number"):
        create_optimizer(rate, total_steps=10)


JAX_STEPS = """
import json, os, sys
os.environ["KERAS_BACKEND"] = "jax"
import keras, numpy as np
from keras_bert_zoo.training import create_optimizer
assert keras.backend.backend() == "jax"
init, grads = json.load(open(sys.argv[1]))
variables = {k: keras.Variable(np.array(v, "float32"), name=k.split("/")[1]) for k, v in init.items()}
optimizer = create_optimizer(1e-2, total_steps=len(grads), warmup_steps=2)
for g in grads:
    optimizer.apply_gradients([(np.array(g[k], "float32"), variables[k]) for k in init])
print(json.dumps({k: np.asarray(v).tolist() for k, v in variables.items()}))
"""


def test_the_same_steps_on_jax(tmp_path):
    """On JAX (no fused kernel) the element-wise update steps as TensorFlow's fused one."""
    pytest.importorskip("jax")
    rng = np.random.default_rng(3)
    shapes = {"dense/kernel": (4, 3), "LayerNorm/gamma": (3,)}
    init = {k: rng.normal(size=s).astype("float32") for k, s in shapes.items()}
    grads = [{k: rng.normal(size=s).astype("float32") for k, s in shapes.items()} for _ in range(6)]
    (tmp_path / "steps.json").write_text(
        json.dumps([{k: v.tolist() for k, v in init.items()}, [{k: v.tolist() for k, v in g.items()} for g in grads]])
    )
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": REPO_ROOT}
    result = subprocess.run(
        [sys.executable, "-c", JAX_STEPS, str(tmp_path / "steps.json")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    on_jax = json.loads(result.stdout.strip().splitlines()[-1])

    variables = {k: keras.Variable(v, name=k.split("/")[1]) for k, v in init.items()}
    optimizer = create_optimizer(1e-2, total_steps=len(grads), warmup_steps=2)
    for g in grads:
        optimizer.apply_gradients([(g[k], variables[k]) for k in shapes])
    assert max(float(np.abs(variables[k].numpy() - init[k]).max()) for k in shapes) > 1e-2  # they moved
    for k in shapes:
        np.testing.assert_allclose(np.array(on_jax[k], "float32"), variables[k].numpy(), rtol=0, atol=4e-6)
