"""resolve.py: every auto choice and model default taken in two pure
functions, from the model's spec, never mutating what was asked."""
from __future__ import annotations

import copy
import dataclasses

import pytest

from lancetnic_flow.config import DataConfig, FeatureConfig, ModelConfig, TrainConfig, TrainingConfig
from lancetnic_flow.errors import UserError
from lancetnic_flow.registry import MODELS, ModelSpec, Refusal
from lancetnic_flow.options import said
from lancetnic_flow.resolve import (FitCounts, LEARN_VAL_MAX_ROWS, bias_only_lr, choose_model, idle_epoch_options, resolve,
                                    resolve_counts, unused_monitor)


def config(name: str = "auto", task: str | None = None, target: str | None = None, **training) -> TrainConfig:
    return TrainConfig(data=DataConfig(train=["x.csv"], target=target), model=ModelConfig(name=name),
                       training=TrainingConfig(task=task, **training))


def every_model_and_task():
    for name, spec in MODELS.items():
        for task in spec.every_task:
            yield name, task


@pytest.mark.parametrize("name,task", list(every_model_and_task()))
def test_resolving_a_resolved_configuration_changes_nothing_and_the_given_one_is_left_as_it_was(name, task):
    given = config(name, task, target="y" if task in ("regress", "multitask") else None)
    before = copy.deepcopy(given)
    once = resolve(given)
    assert given == before                                        # nothing was mutated
    assert resolve(once) == once                                  # a fixed point: config.json resumes as it ran
    assert resolve(TrainConfig.from_dict(once.to_dict())) == once  # through the run folder's JSON too
    assert once.training.task == task and once.model.name == name


def test_each_model_gets_the_defaults_its_spec_declares():
    for name, spec in MODELS.items():
        task = "regress" if spec.task == "regress" else None
        r = resolve(config(name, task, target="y" if spec.task in ("regress", "multitask") else None))
        t = r.training
        assert r.model.hidden == spec.hidden, name
        assert t.batch_size == spec.batch_size, name
        assert t.early_stopping == spec.early_stopping, name
        assert t.sparse_optimizer == spec.sparse_optimizer, name
        assert t.sparse_lr == spec.default_sparse_lr(spec.sparse_optimizer, t.task), name
        assert r.features.mode == spec.features[0], name
        for key, value in spec.sets.items():
            section, option = key.split(".")
            assert getattr(getattr(r, section), option) == value, (name, key)


def test_a_model_registered_from_outside_gets_its_own_specs_defaults_not_a_built_in_familys(monkeypatch):
    monkeypatch.setitem(MODELS, "MyBag", ModelSpec("MyNet", hidden=48, sparse_optimizer="sgd", sparse_lr=0.7,
                                                   early_stopping=5, tasks=("classify",)))
    r = resolve(config("MyBag"))
    assert (r.model.hidden, r.training.sparse_optimizer, r.training.sparse_lr, r.training.early_stopping) == \
           (48, "sgd", 0.7, 5)


def test_a_registered_models_refusal_is_an_error_when_named_and_a_pass_for_auto(monkeypatch):
    refuse = Refusal("data.numeric", lambda c: bool(c.data.numeric), "it reads text only")
    monkeypatch.setitem(MODELS, "TextOnly", ModelSpec("ScalpelNet", refuses=(refuse,)))
    cfg = config("TextOnly")
    cfg.data.numeric = ["n"]
    with pytest.raises(UserError, match="numeric does not apply to TextOnly: it reads text only"):
        resolve(cfg)
    monkeypatch.setattr("lancetnic_flow.resolve.AUTO_CHOICES", ("TextOnly", "ScalpelMC"))
    cfg.model.name = "auto"
    assert resolve(cfg).model.name == "ScalpelMC"


@pytest.mark.parametrize("change,model", [
    ({}, "LinearSVM"),
    ({"task": "multilabel"}, "LinearSVM"),   # one margin per label
    ({"task": "multilabel", "class_weights": "balanced"}, "ScalpelMC"),
    ({"target": "y"}, "ScalpelMC"),
    ({"ddp": 2}, "LinearSVM"),            # its ranks average their weights
    ({"numeric": ["n"]}, "ScalpelMC"),
    ({"hidden": 128}, "ScalpelMC"),
    ({"layers": 2}, "ScalpelMC"),
    ({"layers": 0}, "ScalpelMC"),   # the MLP's linear form, trained by gradients, as asked
    ({"dropout": 0.5}, "ScalpelMC"),
    ({"class_weights": "balanced"}, "ScalpelMC"),
    ({"device": "cuda"}, "ScalpelMC"),
    ({"lr": 0.05}, "ScalpelMC"),   # the dense layers' rate: LinearSVM has none
    ({"features": "ids"}, "ScalpelMC"),
])
def test_auto_takes_the_first_choice_that_accepts_every_option(change, model):
    cfg = config()
    for key, value in change.items():
        section = {"target": cfg.data, "numeric": cfg.data, "hidden": cfg.model, "layers": cfg.model,
                   "dropout": cfg.model, "features": cfg.features}.get(key, cfg.training)
        setattr(section, "mode" if key == "features" else key, value)
    if change.get("features") == "ids":
        assert choose_model(cfg) == "ScalpelMC"   # the fallback, which then refuses ids itself
        return
    assert resolve(cfg).model.name == model


@pytest.mark.parametrize("name,field,value,takes", [
    ("LinearSVM", "lr", 0.5, "ScalpelMC"),        # its step's rate is --sparse-lr
    ("LinearSVM", "embed", 8, "LancetMC"),
    ("ScalpelMC", "embed", 8, "LancetMC"),        # a bag's rows are --hidden wide
    ("FastTextBag", "embed", 8, "LancetMC"),
    ("FastTextBag", "dropout", 0.5, "ScalpelMC"),  # its network fixes dropout at 0
])
def test_an_option_the_model_would_ignore_is_refused_with_a_model_that_takes_it(name, field, value, takes):
    cfg = config(name)
    setattr(cfg.training if field == "lr" else cfg.model, field, value)   # (the others: model options)
    with pytest.raises(UserError, match=f"{field} does not apply to {name}") as e:
        resolve(cfg)
    assert e.value.hint.endswith(takes)
    cfg.model.name = takes
    assert resolve(cfg).model.name == takes   # the model it names takes it


@pytest.mark.parametrize("field,value", [("hidden", 16), ("dropout", 0.5)])
def test_a_bag_without_a_hidden_layer_refuses_its_width_and_dropout_and_says_layers_1_takes_them(field, value):
    cfg = config("ScalpelMC")
    cfg.model.layers = 0
    setattr(cfg.model, field, value)
    with pytest.raises(UserError, match=f"{field} does not apply to ScalpelMC: with --layers 0") as e:
        resolve(cfg)
    assert e.value.cli[1].endswith("--layers 1")
    cfg.model.layers = 1
    assert getattr(resolve(cfg).model, field) == value


@pytest.mark.parametrize("name", ["ScalpelMC", "FastTextBag"])
def test_a_bag_without_a_hidden_layer_resolves_again_as_its_trials_and_resume_resolve_it(name):
    # The resolved width (the bag's own) was refused as a --hidden given: tune --layers 0 and --resume stopped
    once = resolve(dataclasses.replace(config(name), model=ModelConfig(name=name, layers=0),
                                       given=frozenset({"model.layers"})))
    assert resolve(once) == once                                               # tune's trials
    assert resolve(TrainConfig.from_dict(once.to_dict())).to_dict() == once.to_dict()   # --resume's config.json
    typed = dataclasses.replace(once, given=frozenset({"model.hidden"}))   # typed at that width: still refused
    with pytest.raises(UserError, match=f"hidden does not apply to {name}: with --layers 0"):
        resolve(typed)


@pytest.mark.parametrize("name", ["LancetMC", "LancetMCA", "LancetMCA_gru", "LancetReg"])
def test_a_sequence_model_refuses_layers_0_which_trained_the_one_layer_network(name):
    cfg = config(name, target="y") if name == "LancetReg" else config(name)
    cfg.model.layers = 0
    with pytest.raises(UserError, match=f"layers does not apply to {name}: its tokens are read by at least one "):
        resolve(cfg)
    cfg.model.layers = 2
    assert resolve(cfg).model.layers == 2


def test_auto_with_a_target_regresses_and_a_named_model_keeps_its_own_task_or_refuses_the_target_it_would_not_read():
    assert resolve(config(target="y")).training.task == "regress"
    assert resolve(config("ScalpelMC")).training.task == "classify"
    # A named classifier given a target would classify and read no value: refused, not ignored.
    with pytest.raises(UserError, match=r"target y is a value to predict, and this run's task, classify, predicts "
                                        r"labels \(ScalpelMC's\)"):
        resolve(config("ScalpelMC", target="y"))
    assert resolve(config("ScalpelMC", "regress", target="y")).training.task == "regress"


def test_ddp_turns_the_twin_off_by_default_and_refuses_it_when_asked():
    assert resolve(config(ddp=2)).training.learn_val is False
    with pytest.raises(UserError, match="learn_val: under ddp"):
        resolve(config("LinearSVM", ddp=2, learn_val=True))


def with_cluster(cfg: TrainConfig, **cluster) -> TrainConfig:
    return dataclasses.replace(cfg, cluster=dataclasses.replace(cfg.cluster, **cluster))


def test_train_on_auto_trains_on_the_cluster_with_a_scheduler_or_ddp_as_one_trainer_task(monkeypatch):
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    local = resolve(config())
    assert (local.cluster.train_on, local.training.ddp) == ("client", None)
    ext = resolve(with_cluster(config(), scheduler="tcp://10.0.0.1:8786"))
    assert (ext.cluster.train_on, ext.training.ddp) == ("cluster", 1)   # one trainer task on a worker
    assert resolve(ext) == ext
    assert resolve(config(ddp=2)).cluster.train_on == "cluster"
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://10.0.0.1:8786")
    assert resolve(config()).training.ddp == 1
    # Asked for: the client, even with a scheduler; or the cluster, with a LocalCluster.
    assert resolve(with_cluster(config(), train_on="client")).training.ddp is None
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS")
    assert resolve(with_cluster(config(), train_on="cluster")).training.ddp == 1


def test_train_on_refuses_what_contradicts_it_naming_both_options():
    with pytest.raises(UserError, match="train_on client trains in this process; ddp 2 trains on Dask workers"):
        resolve(with_cluster(config(ddp=2), train_on="client"))
    with pytest.raises(UserError, match="train_on cluster trains on a Dask worker; run_on process starts no cluster"):
        resolve(with_cluster(config(), train_on="cluster", run_on="process"))
    with pytest.raises(UserError, match="train_on"):
        with_cluster(config(), train_on="gpu").cluster.validate()


def test_one_trainer_task_keeps_linear_svms_twin_that_several_ranks_cannot_have():
    one = resolve(with_cluster(config("LinearSVM"), train_on="cluster"))
    assert one.training.learn_val is None   # decided by the rows, as in this process
    assert resolve(config("LinearSVM", ddp=1, learn_val=True)).training.learn_val is True
    with pytest.raises(UserError, match="ddp: 0 ranks"):
        config(ddp=0).training.validate()


def test_sync_every_applies_to_linear_svm_ranks_only_and_is_refused_where_it_would_do_nothing():
    assert resolve(config(ddp=2, sync_every=20)).training.sync_every == 20
    with pytest.raises(UserError, match="this run has no ddp"):
        resolve(config(sync_every=20))
    with pytest.raises(UserError, match="ScalpelMC's ranks exchange gradients"):
        resolve(config("ScalpelMC", ddp=2, sync_every=20))
    with pytest.raises(UserError, match="≥ 1"):
        config(ddp=2, sync_every=0).training.validate()


@pytest.mark.parametrize("where", [{"ddp": 1}, {"train_on": "cluster"}, {"scheduler": "tcp://sched:8786"}])
def test_sync_every_for_one_rank_that_has_none_to_average_with_is_refused_not_ignored(where):
    cfg = config(sync_every=20, ddp=where.get("ddp"))
    if "ddp" not in where:
        cfg = with_cluster(cfg, **where)
    with pytest.raises(UserError, match="this run trains one rank, which has no other to average with"):
        resolve(cfg)


def test_sync_rows_is_all_by_default_and_an_unknown_value_names_the_choices():
    assert config(ddp=2).training.sync_rows == "all"
    assert config(ddp=2, sync_rows="touched").training.sync_rows == "touched"
    with pytest.raises(UserError, match="sync_rows: 'some' is not one of all, touched"):
        config(ddp=2, sync_rows="some").training.validate()


def test_sync_rows_touched_is_refused_where_no_ranks_average_weights():
    assert resolve(config(ddp=2, sync_rows="touched")).training.sync_rows == "touched"
    with pytest.raises(UserError, match="no ranks to average"):
        resolve(config(sync_rows="touched"))
    with pytest.raises(UserError, match="ScalpelMC's ranks exchange gradients"):
        resolve(config("ScalpelMC", ddp=2, sync_rows="touched"))


def test_sync_rows_typed_at_its_default_is_refused_where_no_ranks_average_weights():
    # --sync-rows all without --ddp: it ran and chose nothing, config.json said it was set
    for cfg, words in ((config(sync_rows="all"), "sync_rows all chooses .* no ranks to average"),
                       (config("ScalpelMC", ddp=2, sync_rows="all"), "ScalpelMC's ranks exchange gradients")):
        with pytest.raises(UserError, match=words):
            resolve(dataclasses.replace(cfg, given=frozenset({"training.sync_rows"})))
    ranks = dataclasses.replace(config(ddp=2, sync_rows="all"), given=frozenset({"training.sync_rows"}))
    assert resolve(ranks).training.sync_rows == "all"
    assert resolve(config(sync_rows="all")).training.sync_rows == "all"   # the default, not typed


def test_the_legacy_hinge_optimiser_of_old_run_folders_resolves_to_the_rule_and_is_refused_elsewhere():
    old = resolve(config("LinearSVM", sparse_optimizer="hinge"))
    assert old.training.sparse_optimizer is None
    with pytest.raises(UserError, match="own step"):
        resolve(config("ScalpelMC", sparse_optimizer="hinge"))


def test_resolve_counts_turns_auto_to_its_next_choice_when_classes_outgrow_the_first():
    given = config(epochs=7)   # an option both take, kept across the move
    first = resolve(given)
    assert first.model.name == "LinearSVM"
    limit = MODELS["LinearSVM"].max_classes
    kept, _ = resolve_counts(given, first, FitCounts(rows=100, classes=limit), lambda c: True)
    moved, _ = resolve_counts(given, first, FitCounts(rows=100, classes=limit + 1), lambda c: True)
    assert kept.model.name == "LinearSVM"
    assert moved == dataclasses.replace(resolve(dataclasses.replace(given, model=ModelConfig(name="ScalpelMC"))))
    assert given.model.name == "auto" and first.model.name == "LinearSVM"   # neither was changed


def test_label_sets_keep_the_linear_model_past_its_class_limit_up_to_its_label_limit():
    given = config(task="multilabel")
    first = resolve(given)
    spec = MODELS["LinearSVM"]
    assert first.model.name == "LinearSVM" and spec.max_labels > spec.max_classes
    past_classes, _ = resolve_counts(given, first, FitCounts(rows=100, classes=spec.max_classes + 1), lambda c: True)
    past_labels, _ = resolve_counts(given, first, FitCounts(rows=100, classes=spec.max_labels + 1), lambda c: True)
    assert past_classes.model.name == "LinearSVM" and past_labels.model.name == "ScalpelMC"


def test_resolve_counts_turns_auto_to_its_next_choice_when_the_first_does_not_fit_the_plan():
    given = config()
    linear_fits = lambda c: c.model.name != "LinearSVM"   # noqa: E731 — the plan holds the MLP only
    cfg, _ = resolve_counts(given, resolve(given), FitCounts(rows=100, classes=4), linear_fits)
    assert cfg.model.name == "ScalpelMC"


def test_a_named_model_never_falls_back():
    given = config("LinearSVM")
    cfg, _ = resolve_counts(given, resolve(given), FitCounts(rows=100, classes=10_000), lambda c: True)
    assert cfg.model.name == "LinearSVM"


def test_learning_the_validation_rows_is_decided_by_the_rows_and_the_room_for_the_twin():
    given = config()
    r = resolve(given)
    assert r.training.learn_val is None   # not before the counts
    few = FitCounts(rows=LEARN_VAL_MAX_ROWS, classes=4)
    many = FitCounts(rows=LEARN_VAL_MAX_ROWS + 1, classes=4)
    assert resolve_counts(given, r, few, lambda c: True)[0].training.learn_val is True
    assert resolve_counts(given, r, many, lambda c: True)[0].training.learn_val is False
    no_twin = lambda c: c.training.learn_val is False   # noqa: E731 — the model fits, its twin does not
    cfg, notes = resolve_counts(given, r, few, no_twin)
    assert cfg.model.name == "LinearSVM" and cfg.training.learn_val is False
    assert len(notes) == 1 and "--memory-budget" in said(notes[0], "cli")


def test_a_validation_file_stays_held_out_and_a_model_without_a_twin_refuses_learn_val():
    cfg = config()
    cfg.data.val = ["v.csv"]
    assert resolve(cfg).training.learn_val is False
    with pytest.raises(UserError, match="learn_val") as e:
        resolve(config("ScalpelMC", learn_val=True))
    assert "LinearSVM" in e.value.hint


def test_a_vocabulary_cap_asks_for_a_fitted_vocabulary_and_ids_read_single_words():
    cfg = config("ScalpelMC")
    cfg.features = FeatureConfig(max_features=5000)
    assert resolve(cfg).features.mode == "tfidf"
    assert resolve(config("LancetMC")).features.ngrams == 1


# ---------------------------------------------------------------- --analyzer auto, from a sample

from lancetnic_flow.resolve import AUTO_CHAR_NGRAMS, resolve_sample, words_kept_warning  # noqa: E402


def test_analyzer_auto_stays_undecided_until_the_sample_for_hashed_features():
    cfg = resolve(config())
    assert cfg.features.mode == "hashing" and cfg.features.analyzer == "auto"


@pytest.mark.parametrize("features", [dict(mode="tfidf"), dict(stop_words="english"), dict(mode="ids")])
def test_analyzer_auto_reads_words_where_only_words_can_be_read(features):
    name = "LancetMC" if features.get("mode") == "ids" else "auto"
    given = config(name)
    given.features = FeatureConfig(**features)
    assert resolve(given).features.analyzer == "word"


def test_text_without_spaces_turns_auto_to_character_ngrams_in_both_configurations_and_says_so():
    given = config()
    resolved = resolve(given)
    g, r, note = resolve_sample(given, resolved, share=0.8, letters=5000)
    assert (r.features.analyzer, r.features.ngram_min, r.features.ngrams) == ("char_wb", *AUTO_CHAR_NGRAMS)
    assert (g.features.analyzer, g.features.ngram_min, g.features.ngrams) == ("char_wb", *AUTO_CHAR_NGRAMS)
    assert note.startswith("analyzer char_wb 1,3: 80% of the sampled letters") and "--analyzer word" in said(note, "cli")
    assert given.features.analyzer == "auto" and resolved.features.analyzer == "auto"   # not mutated
    assert resolve(g) == r and resolve(r) == r          # --model auto's retries and --resume keep the choice


def test_text_with_spaces_turns_auto_to_words_with_the_range_as_given_and_says_nothing():
    given = config()
    g, r, note = resolve_sample(given, resolve(given), share=0.01, letters=5000)
    assert (r.features.analyzer, r.features.ngram_min, r.features.ngrams) == ("word", 1, 2) and note is None
    _, r, _ = resolve_sample(given, resolve(given), share=0.9, letters=0)   # no letters: no evidence
    assert r.features.analyzer == "word"


def test_words_cut_at_their_vowel_marks_turn_auto_to_character_ngrams_and_say_why():
    """Vocalised Arabic or Hebrew: letters the word pattern reads, marks between them it
    cuts each word at. Auto read words there, and only warned."""
    given = config()
    g, r, note = resolve_sample(given, resolve(given), share=0.0, letters=5000, marked=0.6)
    assert (r.features.analyzer, r.features.ngram_min, r.features.ngrams) == ("char_wb", *AUTO_CHAR_NGRAMS)
    assert g.features.analyzer == "char_wb"
    assert note.startswith("analyzer char_wb 1,3: 60% of the sampled words hold vowel marks") and "Arabic" in note
    _, r, note = resolve_sample(given, resolve(given), share=0.0, letters=5000, marked=0.05)   # a stray shadda
    assert r.features.analyzer == "word" and note is None


def test_an_explicit_ngram_range_is_kept_when_auto_turns_to_characters():
    given = config()
    given.features = FeatureConfig(ngram_min=2, ngrams=5)
    _, r, note = resolve_sample(given, resolve(given), share=0.9, letters=100)
    assert (r.features.analyzer, r.features.ngram_min, r.features.ngrams) == ("char_wb", 2, 5)
    assert "char_wb 2,5" in note


@pytest.mark.parametrize("features, says", [
    (dict(mode="tfidf"), ("--features tfidf", "--features hashing")),
    (dict(stop_words="english"), ("--stop-words", "drop --stop-words")),
    (dict(mode="ids"), ("LancetMC reads word tokens", "--model LinearSVM")),
])
def test_words_settled_by_another_option_on_text_whose_words_do_not_repeat_are_named_with_the_fix(features, says):
    given = config("LancetMC" if features.get("mode") == "ids" else "auto")
    given.features = FeatureConfig(**features)
    r = resolve(given)
    warning = said(words_kept_warning(r.features, r.model.name, share=0.8, letters=5000), "cli")
    assert warning.startswith("80% of the sampled letters") and all(s in warning for s in says), warning
    # Words fit the text, no letters to judge by, or the user's own tokenizer splits the words: nothing to say.
    assert words_kept_warning(r.features, r.model.name, share=0.1, letters=5000) is None
    assert words_kept_warning(r.features, r.model.name, share=0.9, letters=0) is None
    r.features.tokenizer = "my_pkg.segment:words"
    assert words_kept_warning(r.features, r.model.name, share=0.9, letters=5000) is None


@pytest.mark.parametrize("analyzer", ["word", "char", "char_wb"])
def test_an_explicit_analyzer_always_wins_over_the_sample(analyzer):
    given = config()
    given.features = FeatureConfig(analyzer=analyzer)
    resolved = resolve(given)
    g, r, note = resolve_sample(given, resolved, share=1.0 if analyzer == "word" else 0.0, letters=100)
    assert r is resolved and g is given and note is None and r.features.analyzer == analyzer


def test_the_sequence_models_take_batches_of_128_and_the_others_512_unless_the_user_gives_one():
    assert resolve(config("LancetMCA")).training.batch_size == 128
    assert resolve(config("LinearSVM")).training.batch_size == 512
    assert resolve(config("ScalpelMC")).training.batch_size == 512
    assert resolve(config("LancetMCA", batch_size=512)).training.batch_size == 512


def test_run_on_process_with_what_asks_for_a_cluster_names_that_option_not_train_on():
    with pytest.raises(UserError, match="run_on process starts no cluster, and ddp 2 trains on Dask workers") as e:
        resolve(with_cluster(config(ddp=2), run_on="process"))
    assert "train_on" not in str(e.value) and "drop ddp" in str(e.value)
    with pytest.raises(UserError, match="run_on process starts no cluster, and scheduler trains on Dask workers"):
        resolve(with_cluster(config(), run_on="process", scheduler="tcp://10.0.0.1:8786"))


def with_cache(cfg: TrainConfig, cache: str) -> TrainConfig:
    return dataclasses.replace(cfg, output=dataclasses.replace(cfg.output, cache=cache))


def test_cache_none_is_taken_wherever_the_model_trains(monkeypatch):
    """Without a cache the trainer here, --ddp's ranks and --scheduler's trainer task featurise each epoch."""
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    cfg = resolve(with_cache(config(), "None "))
    assert cfg.output.cache == "none" and cfg.output.no_cache and cfg.training.ddp is None
    assert resolve(cfg) == cfg
    assert not resolve(with_cache(config(), "./none")).output.no_cache   # a folder of that name
    for given, ddp in [(config(ddp=2), 2), (with_cluster(config(), train_on="cluster"), 1),
                       (with_cluster(config(), scheduler="tcp://10.0.0.1:8786"), 1)]:
        taken = resolve(with_cache(given, "none"))
        assert taken.output.no_cache and taken.training.ddp == ddp and taken.cluster.train_on == "cluster"
    ok = resolve(with_cache(with_cluster(config(), scheduler="tcp://10.0.0.1:8786", train_on="client"), "none"))
    assert ok.training.ddp is None and ok.output.no_cache


@pytest.mark.parametrize("name,task,monitor", [
    ("LinearSVM", "multilabel", "val_micro_f1"),   # its val_loss grows as its margins do: not its monitor
    ("LinearSVM", "classify", "val_accuracy"),
    ("ScalpelMC", "multilabel", "val_loss"),        # a model of probabilities keeps its loss
    ("ScalpelMC", "classify", "val_accuracy"),
])
def test_a_margin_models_default_monitor_is_never_its_scores_loss(name, task, monitor):
    """Before: a multilabel LinearSVM monitored val_loss, its scores' loss at scale 1, which rises
    while micro-F1 climbs from 0 to 0.6: `tune` chose its least trained trial (0.37)."""
    assert resolve(config(name, task)).training.monitor == monitor
    assert resolve(config(name, task, monitor="val_loss")).training.monitor == "val_loss"   # given: kept


def test_early_stopping_given_without_a_row_held_out_is_refused_as_an_option_that_would_do_nothing():
    no_val = config("ScalpelMC", early_stopping=2)
    no_val.data.val_fraction = 0.0
    with pytest.raises(UserError, match=r"early.stopping 2 stops when the validation scores stop improving, and "
                                        r"(--)?val.fraction 0 without (--)?val holds no row out"):
        resolve(no_val)
    default = config("ScalpelMC")                      # the model's own patience: nothing was asked
    default.data.val_fraction = 0.0
    # none to watch, and recorded as none: resuming or continuing the run read a 2 there as given, and refused it
    assert resolve(default).training.early_stopping == 0
    assert resolve(resolve(default)).training.early_stopping == 0
    with_file = config("ScalpelMC", early_stopping=2)
    with_file.data.val_fraction, with_file.data.val = 0.0, ["val.csv"]
    assert resolve(with_file).training.early_stopping == 2


def features(name: str = "auto", **given) -> TrainConfig:
    cfg = config(name)
    cfg.features = FeatureConfig(**given)
    return cfg


def test_a_feature_option_of_another_mode_is_refused_not_ignored():
    with pytest.raises(UserError, match=r"min.df 2 prunes a fitted vocabulary's terms"):
        resolve(features("LinearSVM", mode="hashing", min_df=2))
    with pytest.raises(UserError, match=r"max.df 0.5 prunes"):
        resolve(features("LinearSVM", mode="hashing", max_df=0.5))
    # Unset, the mode follows: a document-frequency cut asks for a fitted vocabulary, as a cap does.
    assert resolve(features("LinearSVM", min_df=2)).features.mode == "tfidf"
    with pytest.raises(UserError, match=r"buckets sets the columns of hashed features; .*tfidf fits a vocabulary"):
        resolve(features("LinearSVM", mode="tfidf", buckets=1024))
    with pytest.raises(UserError, match=r"max.len cuts the token ids a sequence model reads; .*hashing makes a bag"):
        resolve(features("LinearSVM", max_len=64))
    assert resolve(features("LancetMC", max_len=64)).features.max_len == 64
    assert resolve(features("LinearSVM")).features.mode == "hashing"    # the defaults refuse nothing


def test_a_loss_option_of_a_task_the_run_does_not_train_is_refused():
    with pytest.raises(UserError, match=r"loss.weights weighs the class and the value losses of .*multitask"):
        resolve(config("ScalpelMC", loss_weights=(1.0, 2.0)))
    assert resolve(config("ScalpelMTSK", "multitask", target="y", loss_weights=(1.0, 2.0))).training.loss_weights
    with pytest.raises(UserError, match=r"value.loss l1 is the loss of a target value"):
        resolve(config("ScalpelMC", value_loss="l1"))
    with pytest.raises(UserError, match=r"class.loss bce is the loss of labels; .*regress, predicts a value only"):
        resolve(config("ScalpelReg", "regress", target="y", class_loss="bce"))


def test_a_loss_option_typed_at_its_default_for_a_task_the_run_does_not_train_is_refused():
    # --value-loss mse on a classifier, --class-weights none on a regression: they ran and did nothing,
    # config.json saying they were set
    def typed(cfg: TrainConfig, field: str) -> TrainConfig:
        return dataclasses.replace(cfg, given=frozenset({field}))

    for cfg, field, words in (
            (config("ScalpelMC", loss_weights=(1.0, 1.0)), "loss_weights", "loss.weights weighs the class and the value"),
            (config("ScalpelMC", value_loss="mse"), "value_loss", "value.loss mse is the loss of a target value"),
            (config("ScalpelReg", "regress", target="y"), "class_loss", "class.loss cross_entropy is the loss of labels"),
            (config("ScalpelReg", "regress", target="y"), "class_weights", "class.weights none weighs the classes")):
        with pytest.raises(UserError, match=words):
            resolve(typed(cfg, f"training.{field}"))
        resolve(cfg)   # not typed: the default, which asks for nothing
    multitask = config("ScalpelMTSK", "multitask", target="y", loss_weights=(1.0, 1.0), value_loss="mse")
    for field in ("loss_weights", "value_loss", "class_loss", "class_weights"):
        resolve(typed(multitask, f"training.{field}"))   # a task that reads them all


def test_linear_svm_refuses_an_optimiser_and_gradient_clipping_and_auto_passes_it_by():
    for option in ({"optimizer": "sgd"}, {"clip_grad": 1.0}):
        with pytest.raises(UserError, match="does not apply to LinearSVM"):
            resolve(config("LinearSVM", **option))
        assert resolve(config(**option)).model.name == "ScalpelMC"
    assert resolve(config("LinearSVM", optimizer="adam")).model.name == "LinearSVM"   # the default: nothing asked


def test_a_sequence_models_token_ids_refuse_n_grams_and_term_weights_they_would_not_use():
    with pytest.raises(UserError, match=r"ngram_range=\(1, 3\): .*ids reads word tokens in order, not n-grams") as e:
        resolve(features("LancetMC", ngrams=3))
    assert e.value.cli[0].startswith("--ngram-range 1,3: --features ids reads")
    for option, typed in (({"idf": False}, "--no-idf"), ({"sublinear_tf": False}, "--no-sublinear-tf")):
        with pytest.raises(UserError, match=r"=False: idf and sublinear tf weigh the terms of a bag") as e:
            resolve(features("LancetMC", **option))
        assert e.value.cli[0].startswith(typed + ": idf and sublinear tf")   # as typed, not `--idf off`
    assert resolve(features("LancetMC")).features.ngrams == 1          # the bag models' default pairs: dropped
    # typed at the bag models' default (--ngrams 2, --ngram-range 1,2) it did nothing as silently
    typed = dataclasses.replace(features("LancetMC", ngrams=2), given=frozenset({"features.ngrams"}))
    with pytest.raises(UserError, match=r"ngram_range=\(1, 2\): .*ids reads word tokens in order, not n-grams"):
        resolve(typed)
    words = dataclasses.replace(features("LancetMC", ngrams=1), given=frozenset({"features.ngrams"}))
    assert resolve(words).features.ngrams == 1                         # --ngrams 1: what ids read
    assert resolve(features("LinearSVM", mode="tfidf", idf=False)).features.idf is False


def test_a_monitor_given_to_a_run_that_keeps_its_last_epoch_is_named_as_choosing_nothing():
    from lancetnic_flow.resolve import unused_monitor
    from lancetnic_flow.training.rules import rule_for

    def warning(name, monitor, early=None):
        given = config(name, monitor=monitor, early_stopping=early)
        resolved = resolve(given)
        return unused_monitor(given, resolved, rule_for(resolved).keeps_last_epoch())

    text = said(warning("LinearSVM", "val_loss"), "cli")   # as the command line reads it (Events' words)
    assert text and "--monitor val_loss chooses no epoch" in text and "--early-stopping N" in text
    assert warning("LinearSVM", "val_loss", early=2) is None       # it stops on val_loss and keeps the best
    assert warning("LinearSVM", None) is None                       # the default score: nothing was asked
    assert warning("LinearSVM", "val_accuracy") is None             # the default, spelled out
    assert warning("ScalpelMC", "val_loss") is None                 # the MLP keeps its best epoch by it


@pytest.mark.parametrize("part, field, value", [
    ("training", "lr", float("nan")), ("training", "sparse_lr", float("inf")), ("training", "clip_grad", float("inf")),
    ("training", "loss_weights", (float("nan"), 1.0)), ("model", "dropout", float("nan")),
])
def test_a_nan_or_infinite_number_is_refused_naming_its_option(part, field, value):
    # nan passes every range check (nan < 0 is False): --lr nan trained an epoch to a "diverged" error
    cfg = TrainConfig(data=DataConfig(train=["x.csv"], label="label", target="target" if field == "loss_weights"
                                      else None), model=ModelConfig(name="ScalpelMTSK" if field == "loss_weights"
                                                                    else "ScalpelMC"))
    setattr(getattr(cfg, part), field, value)
    with pytest.raises(UserError, match="a finite number") as e:
        resolve(cfg)
    assert e.value.field == f"{part}.{field}"


def test_loss_weights_of_zero_for_both_heads_are_refused():
    cfg = TrainConfig(data=DataConfig(train=["x.csv"], label="label", target="target"),
                      model=ModelConfig(name="ScalpelMTSK"), training=TrainingConfig(loss_weights=(0.0, 0.0)))
    with pytest.raises(UserError, match="not both 0"):
        resolve(cfg)
    cfg.training.loss_weights = (0.0, 1.0)   # one head alone still learns
    resolve(cfg)


def test_a_given_ngrams_of_one_holds_for_the_fasttext_bag_as_for_every_bag_model():
    # FastTextBag lifted --ngrams 1 to pairs unless --features was given: the option was accepted and did nothing
    for mode in (None, "hashing", "tfidf"):
        cfg = TrainConfig(data=DataConfig(train=["x.csv"], label="label"), model=ModelConfig(name="FastTextBag"),
                          features=FeatureConfig(mode=mode, ngrams=1))
        assert resolve(cfg).features.ngrams == 1
    assert resolve(TrainConfig(data=DataConfig(train=["x.csv"], label="label"),
                               model=ModelConfig(name="FastTextBag"))).features.ngrams == 2   # its pairs by default


@pytest.mark.parametrize("optimizer", ["radam", "rmsprop", "adadelta"])
def test_an_optimizer_that_steps_every_parameter_refuses_a_sparse_step_and_records_none(optimizer):
    # --sparse-optimizer/--sparse-lr were recorded in config.json and did nothing: one torch optimiser steps all
    def cfg(**training):
        return TrainConfig(data=DataConfig(train=["x.csv"], label="label"), model=ModelConfig(name="ScalpelMC"),
                           training=TrainingConfig(optimizer=optimizer, **training))
    for given in ({"sparse_lr": 5.0}, {"sparse_lr": 0.001, "sparse_optimizer": "adam"}):
        with pytest.raises(UserError, match="steps every parameter") as e:
            resolve(cfg(**given))
        assert e.value.field == "training.sparse_lr"
    t = resolve(cfg()).training
    assert (t.sparse_optimizer, t.sparse_lr) == (None, None)
    assert resolve(cfg(sparse_optimizer="sgd", sparse_lr=2.5)).training.sparse_lr is None   # a saved config's own
    # typed at the model's own value (--optimizer rmsprop --sparse-optimizer sgd): it did nothing, and was let by
    for field, value in (("sparse_optimizer", "sgd"), ("sparse_lr", 2.5)):
        with pytest.raises(UserError, match=f"{field} {value}: optimizer {optimizer} steps every parameter") as e:
            resolve(dataclasses.replace(cfg(**{field: value}), given=frozenset({f"training.{field}"})))
        assert e.value.field == f"training.{field}"
    assert resolve(cfg(sparse_optimizer="adam")).training.sparse_optimizer is None   # one saved before the option
    row_wise = resolve(TrainConfig(data=DataConfig(train=["x.csv"], label="label"), model=ModelConfig(name="ScalpelMC"),
                                   training=TrainingConfig(optimizer="adam", sparse_lr=5.0))).training
    assert (row_wise.sparse_optimizer, row_wise.sparse_lr) == ("sgd", 5.0)


def test_a_regression_run_refuses_class_weights_and_a_label_column_it_would_not_learn():
    # both were accepted and did nothing: the same weights bit for bit, config.json recording them
    def cfg(label="label", **training):
        return TrainConfig(data=DataConfig(train=["x.csv"], label=label, target="y"),
                           model=ModelConfig(name="ScalpelReg"), training=TrainingConfig(**training))
    with pytest.raises(UserError, match="weighs the classes") as e:
        resolve(cfg(class_weights="balanced"))
    assert e.value.field == "training.class_weights"
    with pytest.raises(UserError, match="read and not learned") as e:
        resolve(cfg(label="sentiment"))
    assert "multitask" in e.value.hint
    assert resolve(cfg()).data.label is None   # the default label names no column of the run's
    both = resolve(cfg(label="sentiment", task="multitask", class_weights="balanced"))
    assert (both.data.label, both.training.class_weights) == ("sentiment", "balanced")


def test_a_regression_run_refuses_the_default_label_column_typed():
    # --target y --label label: the labels were not read, and config.json said --label label was asked for
    cfg = TrainConfig(data=DataConfig(train=["x.csv"], target="y"), given=frozenset({"data.label"}))
    with pytest.raises(UserError, match="label label: task regress predicts target y alone") as e:
        resolve(cfg)
    assert e.value.field == "data.label" and "multitask" in e.value.hint
    assert resolve(dataclasses.replace(cfg, given=frozenset())).data.label is None   # not typed: no column asked for


def test_a_monitor_given_with_no_row_held_out_is_refused_as_early_stopping_is():
    # it was accepted and chose nothing (metrics.json: kept last, validated 0), without a word
    cfg = config("ScalpelMC", monitor="val_loss")
    cfg.data.val_fraction = 0.0
    with pytest.raises(UserError, match="val_loss chooses the epoch kept by its validation score") as e:
        resolve(cfg)
    assert e.value.field == "training.monitor"
    cfg.data.val = ["val.csv"]
    assert resolve(cfg).training.monitor == "val_loss"
    saved = config("ScalpelMC", monitor="val_accuracy")   # the model's own, as a saved configuration holds it
    saved.data.val_fraction = 0.0
    assert resolve(saved).training.monitor == "val_accuracy"


def test_a_monitor_typed_at_the_models_default_with_no_row_held_out_is_refused():
    # --val-fraction 0 --monitor val_accuracy: it chose nothing, and config.json said it was asked for
    saved = config("ScalpelMC", monitor="val_accuracy")
    saved.data.val_fraction = 0.0
    typed = dataclasses.replace(saved, given=frozenset({"training.monitor"}))
    with pytest.raises(UserError, match="val_accuracy chooses the epoch kept by its validation score"):
        resolve(typed)
    assert resolve(saved).training.monitor == "val_accuracy"   # not typed: a saved configuration's


@pytest.mark.parametrize("field,value", [("model.hidden", 64), ("model.layers", 1), ("model.dropout", 0.2),
                                         ("training.lr", 0.01), ("training.optimizer", "adam"),
                                         ("training.class_loss", "cross_entropy")])
def test_an_option_typed_at_its_default_that_the_linear_model_cannot_honour_is_never_dropped(field, value):
    """`--hidden 64` (or --layers 1, --dropout 0.2, --lr 0.01 …: each its default) trained
    LinearSVM without a hidden layer, exit 0: the value was all the check read. Given,
    --model auto takes the MLP and a named LinearSVM refuses it; untyped, nothing changes."""
    def given(name: str) -> TrainConfig:
        cfg = config(name)
        section, key = field.split(".")
        setattr(getattr(cfg, section), key, value)
        return dataclasses.replace(cfg, given=frozenset({field}))

    assert resolve(given("auto")).model.name == "ScalpelMC"
    with pytest.raises(UserError, match="does not apply to LinearSVM"):
        resolve(given("LinearSVM"))
    assert resolve(config("auto")).model.name == "LinearSVM"


def test_embed_typed_at_its_default_is_refused_by_the_models_without_token_embeddings():
    embed = config("auto")
    for name in ("auto", "LinearSVM", "ScalpelMC"):
        embed.model.name = name
        with pytest.raises(UserError, match="embed"):
            resolve(dataclasses.replace(embed, given=frozenset({"model.embed"})))
    embed.model.name = "LancetMC"
    assert resolve(dataclasses.replace(embed, given=frozenset({"model.embed"}))).model.embed == 128


def test_an_option_the_linear_model_is_may_be_typed_and_a_bags_fixed_dropout_may_not():
    hinge = dataclasses.replace(config("LinearSVM", class_loss="hinge"), given=frozenset({"training.class_loss"}))
    assert resolve(hinge).model.name == "LinearSVM"
    fixed = config("FastTextBag")
    fixed.model.dropout = 0.2   # the declared default, which FastTextBag's network fixes at 0
    resolve(fixed)
    with pytest.raises(UserError, match="dropout"):
        resolve(dataclasses.replace(fixed, given=frozenset({"model.dropout"})))


@pytest.mark.parametrize("typed", [{"features.ngram_min", "features.ngrams"}, {"features.ngrams"}])
def test_an_ngram_range_typed_at_the_defaults_value_is_kept_when_auto_turns_to_characters(typed):
    # --ngram-range 1,2 (or --ngrams 2) on Chinese text trained char_wb 1,3, the typed range dropped unsaid
    given = dataclasses.replace(config(), given=frozenset(typed))
    _, r, note = resolve_sample(given, resolve(given), share=0.9, letters=100)
    assert (r.features.analyzer, r.features.ngram_min, r.features.ngrams) == ("char_wb", 1, 2)
    assert "char_wb 1,2" in note


def test_learn_val_without_validation_rows_is_refused_rather_than_recorded_as_done():
    # --val-fraction 0 --learn-val trained a twin on no row more, and config.json said learn_val true
    cfg = config("LinearSVM", learn_val=True)
    cfg.data.val_fraction = 0.0
    with pytest.raises(UserError) as e:
        resolve(cfg)
    assert e.value.field == "training.learn_val" and "holds no row out" in e.value.message
    cfg.data.val = ["v.csv"]
    assert resolve(cfg).training.learn_val is True          # a validation file: its rows can be learnt
    cfg = config("LinearSVM")
    cfg.data.val_fraction = 0.0
    assert resolve(cfg).training.learn_val is False         # not given: nothing to learn, nothing said


def test_an_option_given_where_it_does_nothing_is_refused_not_recorded_as_set(monkeypatch):
    # --scheduler-wait without an existing cluster, --wait-for-plots with --no-plots: the run trained
    # and config.json said they were set
    from lancetnic_flow.config import ClusterConfig, OutputConfig

    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    data = DataConfig(train=["x.csv"])
    idle = [(TrainConfig(data=data, cluster=ClusterConfig(scheduler_wait="30s"), given=frozenset({"cluster.scheduler_wait"})),
             "scheduler_wait 30s .* starts its own"),
            (TrainConfig(data=data, output=OutputConfig(plots=False, wait_for_plots=True),
                         given=frozenset({"output.wait_for_plots", "output.plots"})), "none is drawn")]
    for cfg, words in idle:
        with pytest.raises(UserError, match=words):
            resolve(cfg)
    resolve(dataclasses.replace(idle[0][0], cluster=ClusterConfig(scheduler="tcp://h:8786", scheduler_wait="30s")))
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://h:8786")
    resolve(idle[0][0])   # the environment names the cluster
    resolve(dataclasses.replace(idle[1][0], given=frozenset({"output.plots"})))   # the default is no choice


def test_workers_and_worker_threads_on_an_existing_cluster_are_refused_as_doing_nothing(monkeypatch):
    # --scheduler ADDR --workers 3: the run used the cluster's workers, and config.json said 3
    from lancetnic_flow.config import ClusterConfig

    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    data = DataConfig(train=["x.csv"])
    for field, sizes in (("workers", {"workers": 3}), ("threads", {"threads": 2})):
        cfg = TrainConfig(data=data, cluster=ClusterConfig(scheduler="tcp://h:8786", **sizes))
        with pytest.raises(UserError, match=f"{field} . sizes the LocalCluster a run starts, and scheduler names") as e:
            resolve(cfg)
        assert e.value.field == f"cluster.{field}"
        assert e.value.said("cli")[0].startswith(f"--{'workers' if field == 'workers' else 'worker-threads'} ")
        resolve(TrainConfig(data=data, cluster=ClusterConfig(**sizes)))   # a LocalCluster's size: taken
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://h:8786")
    with pytest.raises(UserError, match="DASK_SCHEDULER_ADDRESS names an existing cluster") as e:
        resolve(TrainConfig(data=data, cluster=ClusterConfig(workers=3)))
    assert "unset DASK_SCHEDULER_ADDRESS" in e.value.hint
    resolve(TrainConfig(data=data))


def test_a_memory_budget_on_an_existing_cluster_is_refused_as_doing_nothing(monkeypatch):
    # --scheduler ADDR --memory-budget 8GiB: the plan was rebuilt from the cluster's workers, and config.json said 8GiB
    from lancetnic_flow.config import ClusterConfig

    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    data = DataConfig(train=["x.csv"])
    cfg = TrainConfig(data=data, cluster=ClusterConfig(scheduler="tcp://h:8786", memory_budget=8 << 30))
    with pytest.raises(UserError, match="memory_budget 8.0 GiB splits this machine's memory") as e:
        resolve(cfg)
    assert e.value.field == "cluster.memory_budget" and e.value.said("cli")[0].startswith("--memory-budget 8.0 GiB")
    resolve(TrainConfig(data=data, cluster=ClusterConfig(memory_budget=8 << 30)))   # a LocalCluster's: taken
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://h:8786")
    with pytest.raises(UserError, match="DASK_SCHEDULER_ADDRESS names an existing cluster") as e:
        resolve(TrainConfig(data=data, cluster=ClusterConfig(memory_budget=8 << 30)))
    assert "unset DASK_SCHEDULER_ADDRESS" in e.value.hint


def test_a_local_cluster_size_given_with_a_client_of_ones_own_is_refused_as_doing_nothing():
    # train(cfg, client=c) with memory_budget 8GiB or workers 3: the plan was the client's workers', and config.json said 8GiB
    from lancetnic_flow.config import ClusterConfig
    from lancetnic_flow.resolve import refuse_sizes_for_client

    data = DataConfig(train=["x.csv"])
    refuse_sizes_for_client(TrainConfig(data=data))
    for field, sizes, shown in (("memory_budget", {"memory_budget": 8 << 30}, "8.0 GiB"), ("workers", {"workers": 3}, "3"),
                                ("threads", {"threads": 2}, "2")):
        with pytest.raises(UserError, match=f"{field} {shown} sizes the LocalCluster a run starts, and the run was "
                                            "given a client") as e:
            refuse_sizes_for_client(TrainConfig(data=data, cluster=ClusterConfig(**sizes)))
        assert e.value.field == f"cluster.{field}"


def test_a_resumed_run_given_a_client_leaves_its_local_cluster_sizes_behind_and_refuses_those_given_again():
    # train(resume_config(RUN), resume=RUN, client=c): config.json went on saying this laptop's 6 GiB and 3 workers
    from lancetnic_flow.config import ClusterConfig
    from lancetnic_flow.resolve import sizes_for_client

    cfg = TrainConfig.from_dict(TrainConfig(data=DataConfig(train=["x.csv"]),
                                            cluster=ClusterConfig(workers=3, threads=2, memory_budget=6 << 30)).to_dict())
    out = sizes_for_client(cfg)
    assert (out.cluster.memory_budget, out.cluster.workers, out.cluster.threads) == (None, None, None)
    assert cfg.cluster.workers == 3 and out.__dict__.get("given_accounted")   # the caller's left as it was; the marks kept
    cfg.given = frozenset({"cluster.workers"})   # given again to resume_config: refused, as with a new run
    with pytest.raises(UserError, match="workers 3 sizes the LocalCluster a run starts") as e:
        sizes_for_client(cfg)
    assert e.value.field == "cluster.workers"


def test_threads_for_linearsvm_trained_in_this_process_is_refused_as_doing_nothing(monkeypatch):
    # --threads 4 with the default model: its NumPy step reads no thread count, and config.json said 4
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    data = DataConfig(train=["x.csv"])
    for model in ("auto", "LinearSVM"):
        cfg = TrainConfig(data=data, model=ModelConfig(name=model), training=TrainingConfig(threads=4))
        with pytest.raises(UserError, match="threads 4 sets the torch threads .* LinearSVM trains here without torch") as e:
            resolve(cfg)
        assert e.value.field == "training.threads" and "ddp N" in e.value.hint
    # a network takes it: the MLP here, LinearSVM's --ddp ranks and --train-on cluster's trainer task
    assert resolve(TrainConfig(data=data, model=ModelConfig(name="ScalpelMC"),
                               training=TrainingConfig(threads=4))).training.threads == 4
    assert resolve(TrainConfig(data=data, training=TrainingConfig(threads=4, ddp=2))).training.threads == 4
    on_cluster = resolve(with_cluster(TrainConfig(data=data, training=TrainingConfig(threads=4)), train_on="cluster"))
    assert (on_cluster.model.name, on_cluster.training.threads) == ("LinearSVM", 4)


@pytest.mark.parametrize("label,target,task,numeric,match", [
    ("label", None, None, ["label"], "it is also the run's label column"),
    ("cat", "y", "multitask", ["n", "y"], "it is also the run's target column"),
    ("cat", None, None, ["n", "n"], "names the column 'n' twice"),
    ("cat", None, None, ["target"], "its own target column"),   # trained as the target, its input left out
    ("cat", None, None, ["text"], "also the run's text column"),   # the default text column
    (None, "y", "regress", ["label"], "its own label column"),
    ("cat", None, None, ["status"], "its own prediction status column"),   # the run could not predict
])
def test_a_numeric_column_named_twice_or_as_a_column_the_rows_read_hold_is_refused_naming_it(
        label, target, task, numeric, match):
    # each stopped the run with an internal error, or trained a classifier's numeric 'target' as a target
    cfg = TrainConfig(data=DataConfig(train=["x.csv"], label=label, target=target, numeric=numeric),
                      model=ModelConfig(name="ScalpelMTSK" if task == "multitask" else "auto"),
                      training=TrainingConfig(task=task))
    with pytest.raises(UserError, match=match) as e:
        resolve(cfg)
    assert e.value.field == "data.numeric"
    ok = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, numeric=["n", "text_value"]))
    assert resolve(ok).data.numeric == ["n", "text_value"]


@pytest.mark.parametrize("text,label,target,task,numeric,field,match", [
    (["value"], "cat", None, None, ["value"], "data.numeric", "numeric value: it is also the run's text column: "
     "one column is read either as words or as a number"),
    (["body", "title"], "cat", None, None, ["n", "title"], "data.numeric", "numeric title: it is also"),
    (["body", "body"], "cat", None, None, [], "data.text", "text names the column 'body' twice"),
    (["cat"], "cat", None, None, [], "data.label", "label cat: it is also the run's text column: the model "
     "would read each row's label"),
    (["y"], None, "y", "regress", [], "data.target", "target y: it is also the run's text column"),
    (["body"], "y", "y", "multitask", [], "data.target", "target y: it is also the run's label column"),
])
def test_a_column_read_in_two_roles_or_twice_as_text_is_refused_naming_it_and_both_roles(
        text, label, target, task, numeric, field, match):
    # each trained: text also read as a number, a label or target read in the input, one column learned twice
    cfg = TrainConfig(data=DataConfig(train=["x.csv"], text=text, label=label, target=target, numeric=numeric),
                      model=ModelConfig(name={"multitask": "ScalpelMTSK", "regress": "ScalpelReg"}.get(task, "auto")),
                      training=TrainingConfig(task=task))
    with pytest.raises(UserError, match=match) as e:
        resolve(cfg)
    assert e.value.field == field
    assert e.value.cli[0].startswith(f"--{field[5:]} ")   # the command line names its flag


def test_the_default_label_column_read_as_text_is_refused_but_a_regression_reads_it_freely():
    with pytest.raises(UserError, match="label label: it is also the run's text column"):
        resolve(TrainConfig(data=DataConfig(train=["x.csv"], text=["label"])))
    cfg = resolve(TrainConfig(data=DataConfig(train=["x.csv"], text=["label"], target="y"),
                              model=ModelConfig(name="ScalpelReg"), training=TrainingConfig(task="regress")))
    assert cfg.data.text == ["label"] and cfg.data.label is None


@pytest.mark.parametrize("model, field, value, match", [
    ("LancetMC", "idf", True, "idf and sublinear tf weigh the terms of a bag"),
    ("LancetMC", "sublinear_tf", True, "idf and sublinear tf weigh the terms of a bag"),
    ("LancetMC", "buckets", 524288, "buckets sets the columns of hashed features"),
    ("LinearSVM", "max_len", 256, "max.len cuts the token ids a sequence model reads"),
])
def test_a_feature_option_of_another_mode_typed_at_its_default_is_refused_as_doing_nothing(model, field, value,
                                                                                           match):
    # --model LancetMC --idf (or --buckets 524288, --max-len 256 with a bag) trained as if it was not given
    cfg = features(model, **{field: value})
    with pytest.raises(UserError, match=match):
        resolve(dataclasses.replace(cfg, given=frozenset({f"features.{field}"})))
    resolve(cfg)   # the same value left untyped: the default, no choice


def test_a_val_fraction_typed_at_its_default_beside_a_val_file_is_refused_as_any_other_value_is():
    # --val v.csv --val-fraction 0.1 held nothing out and trained every row without a word
    cfg = TrainConfig(data=DataConfig(train=["x.csv"], val=["v.csv"]))
    with pytest.raises(UserError, match=r"val_fraction 0.1 holds rows of the training data out by hash") as e:
        resolve(dataclasses.replace(cfg, given=frozenset({"data.val_fraction"})))
    assert e.value.field == "data.val_fraction"
    resolve(cfg)   # left untyped: the default, no choice


@pytest.mark.parametrize("field,value", [("idf", False), ("idf", True), ("sublinear_tf", False),
                                         ("sublinear_tf", True)])
def test_the_fasttext_bag_refuses_term_weights_it_averages_away_typed_at_either_value(field, value):
    # FastTextBag's mean pooling never reads a term's value: --no-idf trained the same bytes as --idf.
    for mode in ("hashing", "tfidf"):
        cfg = dataclasses.replace(config("FastTextBag"), given=frozenset({f"features.{field}"}))
        cfg.features = FeatureConfig(mode=mode, **{field: value})
        with pytest.raises(UserError, match=f"{field} does not apply to FastTextBag: it averages its terms' "
                                            "embeddings unweighted") as e:
            resolve(cfg)
        assert "ScalpelMC" in e.value.hint
        assert resolve(dataclasses.replace(cfg, model=ModelConfig(name="ScalpelMC"))).features.mode == mode
    # Not typed (a saved configuration, the defaults) it asks for nothing and passes.
    assert resolve(dataclasses.replace(cfg, given=frozenset())).model.name == "FastTextBag"


def test_typed_storage_options_where_the_data_and_run_folder_are_local_are_refused_and_kept_for_remote_ones():
    local = TrainConfig(data=DataConfig(train=["x.csv"], storage_options={"anon": True}),
                        given=frozenset({"data.storage_options"}))
    with pytest.raises(UserError) as e:
        resolve(local)
    assert "every path here is local (the data x.csv; --out runs)" in e.value.said("cli")[0]
    remote = dataclasses.replace(local, output=dataclasses.replace(local.output, cache="s3://b/cache"))
    assert resolve(remote).data.storage_options == {"anon": True}
    saved = dataclasses.replace(local, given=frozenset())   # a saved run's options, resumed: not typed now
    assert resolve(saved).data.storage_options == {"anon": True}


def _typed(name: str, **training) -> TrainConfig:
    given = TrainConfig(data=DataConfig(train=["x.csv"]), model=ModelConfig(name=name),
                        training=TrainingConfig(**training), given=frozenset(f"training.{k}" for k in training))
    return given


@pytest.mark.parametrize("epochs, patience, warned", [(1, 2, True), (3, 2, True), (4, 2, False), (2, 1, True),
                                                      (3, 1, False), (5, 0, False)])
def test_a_patience_the_epochs_leave_no_room_to_stop_is_warned_of_with_the_epochs_that_would(epochs, patience, warned):
    # the loop stops after an epoch that is not the last, once `patience` epochs have not bettered the best
    given = _typed("ScalpelMC", epochs=epochs, early_stopping=patience)
    notes = idle_epoch_options(given, resolve(given))
    assert bool(notes) == warned
    if warned:
        said = said_cli(notes[0])
        assert said.startswith(f"--early-stopping {patience} can stop no epoch of --epochs {epochs}")
        assert f"give --epochs {patience + 2} or more" in said


def test_a_patience_left_at_the_models_default_is_not_warned_of():
    given = _typed("ScalpelMC", epochs=2)
    assert idle_epoch_options(given, resolve(given)) == []


def test_linearsvms_patience_that_stops_nothing_says_it_still_keeps_the_best_epoch():
    given = _typed("LinearSVM", epochs=3, early_stopping=2)
    assert "LinearSVM still keeps the best epoch's weights" in idle_epoch_options(given, resolve(given))[0]


def test_a_monitor_with_one_epoch_is_warned_of_once_and_not_where_tune_reads_it():
    given = _typed("LinearSVM", epochs=1, monitor="val_loss")
    cfg = resolve(given)
    notes = idle_epoch_options(given, cfg)
    assert len(notes) == 1 and said_cli(notes[0]).startswith("--monitor val_loss chooses no epoch with --epochs 1")
    assert unused_monitor(given, cfg, keeps_last=True) is None   # the LinearSVM note would say it again
    assert idle_epoch_options(given, cfg, monitor=False) == []
    assert idle_epoch_options(_typed("ScalpelMC", epochs=2, monitor="val_loss"),
                              resolve(_typed("ScalpelMC", epochs=2, monitor="val_loss"))) == []


def said_cli(text: str) -> str:
    return said(text, "cli")


@pytest.mark.parametrize("change, warned", [
    ({}, True), ({"numeric": ["n"]}, False), ({"sparse_optimizer": "adam"}, False), ({"layers": 1}, False),
    ({"lr": None}, False)])
def test_an_lr_that_moves_only_the_output_bias_of_a_bag_without_a_hidden_layer_is_warned_of(change, warned):
    training = {"lr": 0.5, "sparse_optimizer": change.get("sparse_optimizer")}
    given = TrainConfig(data=DataConfig(train=["x.csv"], numeric=change.get("numeric", [])),
                        model=ModelConfig(name="ScalpelMC", layers=change.get("layers", 0)),
                        training=TrainingConfig(**{k: v for k, v in training.items() if v is not None}),
                        given=frozenset({"training.lr"} - ({"training.lr"} if "lr" in change else set())))
    note = bias_only_lr(given, resolve(given))
    assert bool(note) == warned
    if warned:
        assert said_cli(note).startswith("--lr 0.5 moves only the output bias of ScalpelMC with --layers 0")
        assert "step at --sparse-lr 2.5 (sgd)" in said_cli(note)


def test_words_cut_at_their_marks_warn_naming_what_reads_them_whole():
    # 'résumé' written decomposed (NFD) was read as 're' and 'sume' with nothing said
    from lancetnic_flow.config import FeatureConfig
    from lancetnic_flow.resolve import cut_words_warning

    words = FeatureConfig(analyzer="word", mode="hashing")
    nfd = said(cut_words_warning(words, 0.8, 5000, 0.0), "cli")
    assert nfd.startswith("80% of the sampled words hold combining marks") and nfd.endswith(
        "--normalize nfc joins each accent to its letter")
    vocalised = said(cut_words_warning(words, 0.9, 5000, 0.9), "cli")
    assert "vocalised Arabic" in vocalised and vocalised.endswith("--analyzer char_wb reads every character")
    assert "--tokenizer" in said(cut_words_warning(FeatureConfig(analyzer="word", mode="tfidf"), 0.9, 5000, 0.9),
                                 "cli")
    # few words cut, no word sampled, text composed already, or characters read: nothing to say
    assert cut_words_warning(words, 0.05, 5000, 0.0) is None and cut_words_warning(words, 0.9, 0, 0.0) is None
    assert cut_words_warning(FeatureConfig(analyzer="word", normalize="nfc"), 0.8, 5000, 0.0) is None
    assert cut_words_warning(FeatureConfig(analyzer="char_wb"), 0.8, 5000, 0.0) is None
    # composing joins no vowel mark: --normalize nfkc (or nfc) left vocalised text cut with nothing said
    kept = cut_words_warning(FeatureConfig(analyzer="word", normalize="nfkc", mode="hashing"), 0.9, 5000, 0.9)
    assert kept is not None and "vocalised Arabic" in kept
