"""Where alarms go: one SNS topic per stack, told on ALARM and on OK, e-mail from CDK context.

``cdk deploy -c alarmEmail=ops@example.com`` subscribes an address (AWS mails a confirmation link);
any other subscriber (chat, paging) subscribes to the ``AlarmTopicArn`` output.

The topic is not KMS-encrypted: CloudWatch cannot publish to a topic under the AWS-managed SNS key,
and alarm messages carry only alarm names, descriptions and metric values (see the cdk-nag
suppression in ``infra.nag``). It refuses non-TLS requests, and its policy lets this account's
CloudWatch alarms publish (a topic policy replaces SNS's default one).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from aws_cdk import Stack
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from infra.errors import ConfigurationError

ALARM_EMAIL_CONTEXT = "alarmEmail"
"""An e-mail address the alarm topic subscribes (AWS mails it a confirmation link first)."""
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def alarm_topic(scope: Construct, construct_id: str = "AlarmTopic") -> sns.Topic:
    topic = sns.Topic(scope, construct_id, display_name="Vigil alarms", enforce_ssl=True)
    stack = Stack.of(scope)
    topic.add_to_resource_policy(
        iam.PolicyStatement(
            sid="CloudWatchAlarmsOfThisAccount",
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=["sns:Publish"],
            resources=[topic.topic_arn],
            conditions={
                "StringEquals": {"aws:SourceAccount": stack.account},
                "ArnLike": {"aws:SourceArn": f"arn:{stack.partition}:cloudwatch:*:*:alarm:*"},
            },
        )
    )
    email = scope.node.try_get_context(ALARM_EMAIL_CONTEXT)
    if email:
        if not isinstance(email, str) or not EMAIL.match(email):
            raise ConfigurationError("Monitoring", ALARM_EMAIL_CONTEXT, f"{email!r} is no e-mail")
        topic.add_subscription(subscriptions.EmailSubscription(email))
    return topic


def notify(topic: sns.ITopic, alarms: Iterable[cloudwatch.Alarm]) -> None:
    """Every alarm tells the topic when it fires and when it clears."""
    action = cloudwatch_actions.SnsAction(topic)
    for alarm in alarms:
        alarm.add_alarm_action(action)
        alarm.add_ok_action(action)
