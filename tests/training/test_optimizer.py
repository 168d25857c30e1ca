"""create_optimizer against references we did not write: torch.optim.AdamW driven by
transformers' get_linear_schedule_with_warmup and clip_grad_norm_, and the schedule
formula of google-research/bert optimization.py."""

import keras
import numpy as np
import pytest

from keras_bert_zoo.training import LinearWarmupLinearDecay, create_optimizer


def test_schedule_matches_original_formula():
    peak, total, warm = 1e-4, 100, 10
    schedule = LinearWarmupLinearDecay(peak, total_steps=total, warmup_steps=warm)
    for step in [0, 1, 5, 9, 10, 11, 50, 99, 100, 120]:
        # optimization.py: polynomial_decay(power=1) to 0 over num_train_steps, and
        # during warm-up init_lr * step / num_warmup_steps.
        if step < warm:
            expected = peak * step / warm
        else:
            expected = peak * max(0.0, (total - step) / (total - warm))
        assert float(schedule(step)) == pytest.approx(expected, rel=1e-6, abs=1e-12)
    config = schedule.get_config()
    assert LinearWarmupLinearDecay(**config)(37) == schedule(37)


def test_schedule_matches_transformers_linear_schedule():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=3e-4)
    sched = transformers.get_linear_schedule_with_warmup(opt, num_warmup_steps=7, num_training_steps=40)
    ours = LinearWarmupLinearDecay(3e-4, total_steps=40, warmup_steps=7)
    for step in range(45):
        assert float(ours(step)) == pytest.approx(opt.param_groups[0]["lr"], rel=1e-5, abs=1e-12)
        opt.step()
        sched.step()


def test_adamw_steps_match_torch_with_clipping_and_decay_exclusions():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    rng = np.random.default_rng(0)
    shapes = {"dense/kernel": (4, 3), "dense/bias": (3,), "LayerNorm/gamma": (3,), "word_embeddings/embeddings": (5, 3)}
    init = {k: rng.normal(size=s).astype("float32") for k, s in shapes.items()}
    steps, warm, lr = 12, 3, 1e-2
    grads = [{k: (rng.normal(size=s) * (3.0 if t % 2 else 0.1)).astype("float32") for k, s in shapes.items()}
             for t in range(steps)]  # odd steps have global norm > 1: clipping matters

    # Ours (Keras). Variable names as in our layers: kernel, bias, gamma, embeddings.
    variables = {k: keras.Variable(v, name=k.split("/")[1]) for k, v in init.items()}
    optimizer = create_optimizer(lr, total_steps=steps, warmup_steps=warm)
    for g in grads:
        optimizer.apply_gradients([(g[k], variables[k]) for k in shapes])

    def torch_reference(clip=True, exclude=True):
        # torch AdamW, decay 0.01 except on biases and LayerNorm (HF's recipe).
        params = {k: torch.nn.Parameter(torch.tensor(v)) for k, v in init.items()}
        no_decay = ["dense/bias", "LayerNorm/gamma"] if exclude else []
        ref = torch.optim.AdamW(
            [{"params": [params[k] for k in shapes if k not in no_decay], "weight_decay": 0.01},
             {"params": [params[k] for k in no_decay], "weight_decay": 0.0}],
            lr=lr, betas=(0.9, 0.999), eps=1e-6,
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

    # Keras adds epsilon to sqrt(v) before the bias correction, torch after: a
    # difference of a few 1e-6 here, against weight moves of ~1e-1.
    assert max_diff(torch_reference()) < 2e-5
    # The tolerance is sharp enough to see each ingredient of the recipe.
    assert max_diff(torch_reference(clip=False)) > 1e-3
    assert max_diff(torch_reference(exclude=False)) > 1e-4


def test_optimizer_constants():
    opt = create_optimizer(5e-5, total_steps=100)
    assert opt.epsilon == 1e-6 and opt.weight_decay == 0.01 and opt.global_clipnorm == 1.0
    assert opt.beta_1 == 0.9 and opt.beta_2 == 0.999
    assert float(opt.learning_rate) == 0.0  # warm-up starts at zero
    with pytest.raises(ValueError, match="warmup_steps"):
        create_optimizer(5e-5, total_steps=10, warmup_steps=20)
