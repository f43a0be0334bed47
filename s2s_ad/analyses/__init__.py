"""Analyses of a lowered function (layer ``analyses``: reads ``ir`` and ``rules``).

``activity`` (which values depend on the differentiated inputs and reach the
seeded outputs; raises for a call without a rule), ``ranks`` (the number of
dimensions and the shape class of each value, from the rules' ``rank``
fields), ``dce`` (what each statement reads, what must be kept).  They compute
facts and change nothing; the transforms read them.
"""
