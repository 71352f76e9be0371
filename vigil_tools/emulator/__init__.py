"""Runs the synthesized CloudFormation template on moto: the local stand-in for an AWS account.

The template is the single description of the resources: the emulator reads it, never a second
hand-written copy.
"""
