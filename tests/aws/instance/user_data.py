#!/usr/bin/env python3
"""user_data.py TEMPLATE RESOURCE [NAME=VALUE...] -- the user data of launch
template RESOURCE as an instance receives it: the template's own
Fn::Base64/Fn::Sub text with CloudFormation's substitution done, printed on
stdout (t0821).

Fn::Sub as CloudFormation does it: ${AWS::Region} and the other pseudo
parameters, the names of the list form's map (given a value here as
NAME=VALUE, since a Ref to a resource is only known once the stack exists),
${!X} left as ${X}.  A ${...} with no value is an error (exit 1), as
CloudFormation refuses the stack.
"""
import json
import re
import sys

PSEUDO = {"AWS::Region": "us-east-1", "AWS::AccountId": "123456789012",
          "AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com"}


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: user_data.py TEMPLATE RESOURCE [NAME=VALUE...]")
    tpl = json.load(open(sys.argv[1]))
    given = dict(a.split("=", 1) for a in sys.argv[3:])
    try:
        ud = (tpl["Resources"][sys.argv[2]]["Properties"]
              ["LaunchTemplateData"]["UserData"]["Fn::Base64"]["Fn::Sub"])
    except (KeyError, TypeError):
        sys.exit("user_data.py: %s has no Fn::Base64/Fn::Sub user data"
                 % sys.argv[2])
    text, mapping = (ud[0], ud[1]) if isinstance(ud, list) else (ud, {})
    values = dict(PSEUDO)
    for k in mapping:
        if k not in given:
            sys.exit("user_data.py: the template maps ${%s} (%s): give "
                     "%s=VALUE" % (k, json.dumps(mapping[k]), k))
        values[k] = given[k]

    def sub(m):
        name = m.group(1)
        if name.startswith("!"):
            return "${" + name[1:] + "}"
        if name not in values:
            sys.exit("user_data.py: ${%s} has no value (CloudFormation would "
                     "refuse the stack)" % name)
        return values[name]

    sys.stdout.write(re.sub(r"\$\{([^}]*)\}", sub, text))


main()
