#!/usr/bin/env node
// cfn-validate.js TEMPLATE... -- validate CloudFormation templates offline,
// as tests/e2e/t0820-aws.sh does for every variant of `elrun aws template`.
//
// The checks are cfn-lint's (the npm package by martysweet: resource types
// exist, properties exist and have the right types, required properties are
// set, Ref, Fn::GetAtt and Fn::Sub name resources, parameters and attributes
// that exist).  cfn-lint's own copy of AWS's resource specification is from
// 2019 (it has no LaunchTemplate MetadataOptions, for one), so before it
// validates anything this swaps in the resource and property types of the
// specification that @aws-cdk/cfnspec ships (AWS's CloudFormation Resource
// Specification, with CDK's published patches).  Both packages are pinned
// in package.json / package-lock.json and installed by scripts/deps.sh.
//
// Prints one line per finding, "TEMPLATE: LEVEL: WHERE: MESSAGE", and
// "TEMPLATE: valid" for a clean one.  Exit status: 0 when every template is
// valid with no warning, 1 when any has a critical error or a warning, 2 on
// bad usage or a file that cannot be read.
'use strict';
const fs = require('fs');

const files = process.argv.slice(2);
if (files.length === 0) {
    console.error('usage: cfn-validate.js TEMPLATE... (JSON or YAML CloudFormation templates)');
    process.exit(2);
}
let awsData, spec, api;
try {
    awsData = require('cfn-lint/lib/awsData');
    spec = require('@aws-cdk/cfnspec/spec/specification.json');
    api = require('cfn-lint/lib/api');
} catch (e) {
    console.error('cfn-validate.js: ' + e.message.split('\n')[0] +
                  ' (run scripts/deps.sh, or npm ci in tests/aws)');
    process.exit(2);
}
// In place: cfn-lint's modules hold this very object.
awsData.awsResources.PropertyTypes = spec.PropertyTypes;
awsData.awsResources.ResourceTypes = spec.ResourceTypes;

let bad = 0;
for (const f of files) {
    if (!fs.existsSync(f)) {
        console.error(`cfn-validate.js: ${f}: no such file`);
        process.exit(2);
    }
    let r;
    try {
        r = api.validateFile(f, {});
    } catch (e) {
        console.log(`${f}: crit: ${e.message.split('\n')[0]}`);
        bad = 1;
        continue;
    }
    const found = [];
    for (const level of ['crit', 'warn']) {
        for (const e of r.errors[level]) found.push(`${f}: ${level}: ${e.resource}: ${e.message}`);
    }
    for (const e of r.errors.info) console.log(`${f}: info: ${e.resource}: ${e.message}`);
    if (found.length || !r.templateValid) {
        bad = 1;
        found.forEach((l) => console.log(l));
        if (!found.length) console.log(`${f}: crit: cfn-lint says the template is not valid`);
    } else {
        console.log(`${f}: valid`);
    }
}
process.exit(bad);
