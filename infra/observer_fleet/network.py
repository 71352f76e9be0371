"""Where the observer tasks run: the VPC (a small one of the fleet's own by default, or one given
or looked up), the subnets picked from it, whether tasks get a public IP, and their security group.

The default VPC has public subnets in two AZs and no NAT gateway, so tasks get a public IP: about
zero fixed cost. A ``vpc_id`` lookup calls AWS at synth (credentials and an explicit account and
region on the stack), and its answer is cached in ``cdk.context.json``.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import aws_ec2 as ec2
from constructs import Construct


@dataclass(frozen=True)
class Network:
    vpc: ec2.IVpc
    subnet_ids: list[str]
    assign_public_ip: bool
    security_group: ec2.SecurityGroup


def build_network(
    scope: Construct,
    vpc: ec2.IVpc | None,
    vpc_id: str | None,
    subnets: ec2.SubnetSelection | None,
    assign_public_ip: bool | None,
) -> Network:
    found, selection, public_ip = _vpc(scope, vpc, vpc_id, subnets, assign_public_ip)
    subnet_ids = found.select_subnets(
        availability_zones=selection.availability_zones,
        one_per_az=selection.one_per_az,
        subnet_filters=selection.subnet_filters,
        subnet_group_name=selection.subnet_group_name,
        subnets=selection.subnets,
        subnet_type=selection.subnet_type,
    ).subnet_ids
    security_group = ec2.SecurityGroup(
        scope,
        "TaskSecurityGroup",
        vpc=found,
        description="Vigil observers: outbound only",
        allow_all_outbound=True,
    )
    return Network(found, subnet_ids, public_ip, security_group)


def _vpc(
    scope: Construct,
    vpc: ec2.IVpc | None,
    vpc_id: str | None,
    subnets: ec2.SubnetSelection | None,
    assign_public_ip: bool | None,
) -> tuple[ec2.IVpc, ec2.SubnetSelection, bool]:
    """The VPC, the subnets to select and the public IP: in the fleet's own VPC public subnets
    with one (it has no NAT); in a given one, private subnets with egress unless told otherwise."""
    if vpc is None and vpc_id is None:
        built = ec2.Vpc(
            scope,
            "Vpc",
            max_azs=2,
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(
                    name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24
                )
            ],
        )
        public = ec2.SubnetSelection(subnet_type=ec2.SubnetType.PUBLIC)
        return built, subnets or public, True if assign_public_ip is None else assign_public_ip
    if vpc is None:
        vpc = ec2.Vpc.from_lookup(scope, "Vpc", vpc_id=vpc_id)
    public_ip = bool(assign_public_ip)
    default = ec2.SubnetSelection(
        subnet_type=ec2.SubnetType.PUBLIC if public_ip else ec2.SubnetType.PRIVATE_WITH_EGRESS
    )
    return vpc, subnets or default, public_ip
