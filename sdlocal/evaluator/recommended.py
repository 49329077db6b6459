"""The recommended rule set: built-in rules, with parameters, that raise no alarm on healthy
pipelines of the common kinds (CNN classifier, LSTM and Transformer language models, VAE, GAN,
regression, a Hugging Face Trainer fine-tune: detection/healthy/, run by
tests/detection/test_healthy_recommended.py) and catch the faults they were kept for.

One name stands for the set: `RecommendedRules`, as the `rule_to_invoke` (or the
RuleConfigurationName) of one DebugRuleConfigurations entry, which the job spec expands into one
entry per rule below (launcher/spec/parse.py); `sdlocal run --recommended-rules` adds that entry,
and from the SageMaker SDK it is
`Rule.sagemaker(base_config={"DebugRuleConfiguration": {"RuleConfigurationName": "RecommendedRules",
"RuleParameters": {"rule_to_invoke": "RecommendedRules"}}, "CollectionConfigurations": []})`.
A rule of the set that the request also configures itself keeps the request's entry.

Adding a rule to the set is adding a `RecommendedRule` to RECOMMENDED (with why it is there);
nothing else is edited. Left out, and why (each fires on some healthy pipeline of the list above):
LossNotDecreasing (a GAN's adversarial losses oppose each other and settle: not decreasing by
design), UnchangedTensor and WeightUpdateRatio (steps with no optimizer update between them: a GAN's
several forwards per update, gradient accumulation; frozen layers of a fine-tune), Overfit and
Overtraining (a VAE's and a GAN's validation/training losses are not one objective), Confusion and
ClassImbalance (a language model's next-token classes, a regression's targets), NLPSequenceRatio
(padding shares are the data's), SimilarAcrossRuns (needs another trial), PoorWeightInitialization
(its gradient spread threshold, 0.001, is absolute: a healthy language model's start with a
2,000-token vocabulary has p95 - p5 of about 3e-4, the loss averaged over every token's logits).

GradientsNotReset and RepeatedBatches are in the set since they judge a GAN as it trains: stale
gradients per optimizer (a DCGAN's generator backward fills the discriminator's gradients after the
discriminator's step; its zero_grad clears them before its next step), repeats across iterations
only (the discriminator sees the same fake batch twice per iteration, detached and not): see
docs/rules-beyond-debugger.md.

A rule of the set that watches a kind of layer the model does not have (DeadRelu: ReLUs,
SaturatedActivation: tanh/sigmoid, CheckInputImages: image inputs) ends Error "judged nothing: no
tensor of collection 'relu_output' was saved ..." (evaluator/unjudged.py: no verdict without data);
an Error is no alarm, and says which rules did not apply.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

NAME = "RecommendedRules"


@dataclass(frozen=True)
class RecommendedRule:
    name: str  # the built-in rule (its class name, `rule_to_invoke`)
    parameters: Mapping[str, str] = field(default_factory=dict)  # RuleParameters besides rule_to_invoke
    why: str = ""


RECOMMENDED: tuple[RecommendedRule, ...] = (
    RecommendedRule("VanishingGradient", why="gradients that no longer train the weights"),
    RecommendedRule("ExplodingTensor", why="NaN/inf in any saved tensor: a diverged run"),
    RecommendedRule("AllZero", {"collection_names": "weights"},
                    why="weights all zero: a zero initialisation or a wiped model"),
    RecommendedRule("TensorVariance", {"collection_names": "weights", "max_threshold": "1000", "min_threshold": "1e-8"},
                    why="weight matrices collapsed to a constant (symmetry never broken) or blown up"),
    RecommendedRule("DeadRelu", why="layers whose ReLUs never activate"),
    RecommendedRule("SaturatedActivation", why="tanh/sigmoid layers stuck in saturation"),
    RecommendedRule("CheckInputImages", why="image inputs left unnormalized (0-255 pixels)"),
    RecommendedRule("StalledTrainingRule", why="a job that stopped writing steps (a hung loader or collective)"),
    # beyond Debugger (docs/rules-beyond-debugger.md): they judge the hook's training records
    RecommendedRule("ReplicaDivergence", why="data-parallel replicas whose weights differ at the same step"),
    RecommendedRule("FrozenParametersChanged", why="parameters marked frozen that change all the same"),
    RecommendedRule("ParametersNotTraining", why="trainable weights no optimizer holds, or held and never changed"),
    RecommendedRule("EvaluationMisuse", why="evaluation in training mode, a module built during evaluation"),
    RecommendedRule("GradientsNotReset", why="optimizer steps on gradients never reset since the step before"),
    RecommendedRule("RepeatedBatches", why="the same training batches again within a pass or on two workers"),
)


def is_recommended(rule_to_invoke: str) -> bool:
    return rule_to_invoke == NAME


def expand(configured: set[str]) -> list[tuple[str, dict[str, str]]]:
    """(RuleConfigurationName, RuleParameters) of each rule of the set that the request does not
    configure itself (`configured`: its other entries' names and rule_to_invoke values)."""
    return [(r.name, {"rule_to_invoke": r.name, **r.parameters}) for r in RECOMMENDED if r.name not in configured]
