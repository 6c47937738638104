#!/usr/bin/env bash
# AWS, offline: there is no AWS here and nothing may contact it.  Every Batch
# and CloudWatch Logs request `elrun submit/status/logs/cancel -s aws_batch`
# makes goes through the real aws CLI (Debian's awscli) pointed at
# tests/e2e/py/aws_fake.py on 127.0.0.1 (ELRUN_AWS_ENDPOINT_URL): the CLI
# builds and validates each request against AWS's service model, and the
# recorder STANDS IN FOR AWS, answering with the documented response shapes.
# What is real: the CLI's parameter validation and request building; what is
# not: AWS's server-side checks, IAM, scheduling.  --dryrun's first document
# goes to `aws batch register-job-definition --cli-input-json` as it is.
# Inside a "Batch node" (AWS_BATCH_* set by hand) two agents rendezvous with
# no rendezvous flags.  Every variant of `elrun aws template` passes a real
# CloudFormation validator: npm's cfn-lint on AWS's resource specification
# (tests/aws, installed by scripts/deps.sh), and the Python cfn-lint where
# the machine has it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/t01-common.bash"

AWS_BIN=$(command -v /usr/bin/aws || command -v aws || true)
if [[ -z $AWS_BIN ]]; then
    test_skip 'aws_batch through the aws CLI' 'no aws CLI (apt-get install awscli)'
    test_done
fi
CFN_LINT=$(command -v cfn-lint || true)
# A PATH with the aws CLI and the basics only; no ~/.aws, dummy credentials.
mkdir -p "$T/bin" "$T/fake" "$T/nobin"
ln -s "$AWS_BIN" "$T/bin/aws"
for p in python3 sh bash; do ln -sf "$(command -v $p)" "$T/nobin/$p"; done
export PATH="$T/bin:/usr/bin:/bin"
export AWS_ACCESS_KEY_ID=AKIDUMMY AWS_SECRET_ACCESS_KEY=dummy AWS_SESSION_TOKEN=dummy
export AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_MAX_ATTEMPTS=1
export AWS_PAGER= HOME="$T"
export ELRUN_HOME="$T/home"
python3 "$ROOT/tests/e2e/py/aws_fake.py" "$T/fake" &
FAKE=$!
track_pid $FAKE
wait_for_file "$T/fake/port"
EP="http://127.0.0.1:$(cat "$T/fake/port")"
export ELRUN_AWS_ENDPOINT_URL="$EP"
echo 'print("hi")' >"$T/train.py"
cd "$T"
CFG=queue=gpu-q,image=acct.dkr.ecr.us-east-1.amazonaws.com/train:1,vcpus=4,memory=8192,gpus=1,job_role=arn:aws:iam::123456789012:role/job,efs=fs-0123456789abcdef0,tags=team:ml
# req N: the Nth recorded request (1-based) as JSON; nreq: how many.
req() { sed -n "${1}p" "$T/fake/requests.jsonl"; }
nreq() { if [[ -f $T/fake/requests.jsonl ]]; then wc -l <"$T/fake/requests.jsonl"; else echo 0; fi; }
jq_() { python3 -c "import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))" "$1"; }
# one_line_fail CMD...: exits non-zero with exactly one line on stderr.
one_line_fail() {
    local st=0
    "$@" >"$T/f.out" 2>"$T/f.err" || st=$?
    cat "$T/f.err"
    [[ $st -ne 0 ]] || { echo "exit status 0: $*"; return 1; }
    [[ $(wc -l <"$T/f.err") -eq 1 ]] || { echo "not one line: $*"; return 1; }
}

test_expect_success '--dryrun: the two documents; the aws CLI takes the first as it is' '
    "$ELRUN" submit -s aws_batch -j 2:3x2 --max-retries 2 --env FOO=bar --cfg "$CFG" \
        --dryrun --max-restarts 3 train.py --epochs 3 >"$T/dry" 2>"$T/dry.err"
    python3 -c "
import json, sys
t = open(sys.argv[1]).read(); d = json.JSONDecoder()
a, i = d.raw_decode(t); b, j = d.raw_decode(t[i:].lstrip())
assert not t[i:].lstrip()[j:].strip(), \"more than two documents\"
json.dump(a, open(\"def.json\", \"w\")); json.dump(b, open(\"sub.json\", \"w\"))
" "$T/dry"
    test "$(nreq)" = 0
    aws --endpoint-url "$EP" batch register-job-definition --cli-input-json file://def.json >reg.out
    grep -q "\"jobDefinitionArn\": \"arn:aws:batch:us-east-1:123456789012:job-definition/train:1\"" reg.out
    # the CLI sent exactly the document elrun printed
    req 1 | python3 -c "import json,sys; r=json.load(sys.stdin); assert r[\"body\"]==json.load(open(\"def.json\")), r" &&
    aws --endpoint-url "$EP" batch submit-job --cli-input-json file://sub.json >sub.out
    grep -q "\"jobId\"" sub.out
    # and a wrong field is refused by the CLI itself, before any request
    python3 -c "
import json; d=json.load(open(\"def.json\")); d[\"nodeProperties\"][\"numNodes\"]=\"3\"; d[\"retryStrateg\"]={}
json.dump(d, open(\"bad.json\",\"w\"))"
    n=$(nreq)
    st=0; aws --endpoint-url "$EP" batch register-job-definition --cli-input-json file://bad.json 2>bad.err || st=$?
    test $st = 252
    grep -q "Parameter validation failed" bad.err
    grep -q "Unknown parameter in input: \"retryStrateg\"" bad.err
    grep -q "Invalid type for parameter nodeProperties.numNodes" bad.err
    test "$(nreq)" = "$n"
    rm -f "$T/fake/requests.jsonl"
'

test_expect_success 'submit registers the job definition and submits it (the recorder stands in for AWS)' '
    H=$("$ELRUN" submit -s aws_batch -j 2:3x2 --max-retries 2 --cfg "$CFG" train.py --epochs 3)
    echo "$H" >handle
    [[ $H == aws_batch://elrun/train-* ]]
    test "$(nreq)" = 2
    req 1 | jq_ "d[\"path\"]" | contains -x /v1/registerjobdefinition
    req 1 | jq_ "\" \".join(d[\"body\"][\"nodeProperties\"][\"nodeRangeProperties\"][0][\"container\"][\"command\"])" |
        contains -x "elrun --nnodes=2:3 --nproc-per-node=2 train.py --epochs 3"
    req 1 | jq_ "d[\"body\"][\"retryStrategy\"][\"attempts\"]" | contains -x 3
    req 2 | jq_ "d[\"path\"]" | contains -x /v1/submitjob
    req 2 | jq_ "d[\"body\"][\"jobDefinition\"]" | contains -xE "arn:aws:batch:us-east-1:123456789012:job-definition/train:[0-9]+"
    req 2 | jq_ "d[\"body\"][\"jobQueue\"]" | contains -x gpu-q
    req 2 | jq_ "d[\"body\"][\"tags\"][\"team\"]" | contains -x ml
    test -s "$ELRUN_HOME/jobs/aws_batch/${H##*/}/job.json"
'

test_expect_success 'status from describe-jobs, the node jobs too' '
    H=$(cat handle)
    "$ELRUN" status "$H" >st
    cat st
    grep -q "State: RUNNING" st
    grep -q "train\[2\]:RUNNING on 10.0.0.12" st
    grep -qE "UI URL: https://us-east-1.console.aws.amazon.com/batch/home\?region=us-east-1#jobs/mnp-job/[0-9a-f-]{36}$" st
    "$ELRUN" status --json "$H" | jq_ "len(d[\"roles\"][0][\"replicas\"])" | contains -x 3
    tail -n 1 "$T/fake/requests.jsonl" | jq_ "d[\"body\"][\"jobs\"]" | contains "#2"
'

test_expect_success 'logs from CloudWatch Logs, one node or all, with role/replica prefixes' '
    H=$(cat handle)
    "$ELRUN" logs "$H" >lg
    test "$(grep -c "^train/[012] node [012] line [012]$" lg)" = 9
    "$ELRUN" logs "$H" train/1 >lg1
    test "$(grep -c "^train/1 node 1 line" lg1)" = 3
    test "$(wc -l <lg1)" = 3
    grep -q "Logs_20140328.GetLogEvents" "$T/fake/requests.jsonl"
    grep -q "\"logGroupName\": \"/aws/batch/job\"" "$T/fake/requests.jsonl"
    "$ELRUN" logs --tail 1 "$H" train/0 >lg0
    test "$(cat lg0)" = "train/0 node 0 line 2"
    # -f follows until every node job ended
    echo SUCCEEDED >"$T/fake/status"
    timeout 20 "$ELRUN" logs -f "$H" >lgf
    test "$(grep -c "^train/[012] node" lgf)" = 9
    rm -f "$T/fake/status"
'

test_expect_success 'a failed job: the failing node and the reason the agents recorded' '
    H=$(cat handle)
    echo FAILED >"$T/fake/status"
    "$ELRUN" status "$H" >st
    cat st
    grep -q "State: FAILED" st
    grep -q "train\[1\]:FAILED (exitcode: 1) on 10.0.0.11" st
    grep -q "Msg: root cause: node 1 on 10.0.0.11 exited with 1: Essential container in task exited; agent on node 1: worker rank 2 exited 1" st
    "$ELRUN" status --json "$H" | jq_ "d[\"root_cause\"][\"replica\"]" | contains -x 1
    rm -f "$T/fake/status"
'

test_expect_success 'list shows the job; cancel terminates it' '
    H=$(cat handle)
    "$ELRUN" list -s aws_batch >ls
    grep -q "^$H  *train  *RUNNING" ls
    "$ELRUN" cancel "$H"
    tail -n 1 "$T/fake/requests.jsonl" | jq_ "d[\"path\"]" | contains -x /v1/terminatejob
    tail -n 1 "$T/fake/requests.jsonl" | jq_ "d[\"body\"][\"reason\"]" | contains -x "cancelled by elrun cancel"
    "$ELRUN" status "$H" | contains "State: CANCELLED"
'

test_expect_success 'submit --wait returns with the job: 0 when it succeeded, 1 when it failed' '
    echo SUCCEEDED >"$T/fake/status"
    timeout 30 "$ELRUN" submit -s aws_batch --wait --cfg "$CFG" train.py 2>w.err
    grep -q "job finished: SUCCEEDED" w.err
    echo FAILED >"$T/fake/status"
    st=0; timeout 30 "$ELRUN" submit -s aws_batch --wait --cfg "$CFG" train.py 2>w.err || st=$?
    test $st = 1
    grep -q "job finished: FAILED" w.err
    rm -f "$T/fake/status"
'

test_expect_success 'a failing aws: one line that says what failed and why' '
    H=$(cat handle)
    echo "the recorder refuses" >"$T/fake/fail"
    one_line_fail "$ELRUN" status "$H"
    grep -q "aws batch describe-jobs failed (exit 254): An error occurred (ClientException) when calling the DescribeJobs operation.*: the recorder refuses" "$T/f.err"
    one_line_fail "$ELRUN" submit -s aws_batch --cfg "$CFG" train.py
    grep -q "was not submitted: aws batch register-job-definition failed" "$T/f.err"
    one_line_fail "$ELRUN" cancel "$H"
    rm -f "$T/fake/fail"
'

test_expect_success 'a missing aws: one line' '
    H=$(cat handle)
    one_line_fail env PATH="$T/nobin" "$ELRUN" status "$H"
    grep -q "cannot run the aws CLI" "$T/f.err"
    grep -q "apt-get install awscli" "$T/f.err"
    one_line_fail env PATH="$T/nobin" "$ELRUN" submit -s aws_batch --cfg "$CFG" train.py
'

test_expect_success 'bad aws_batch input: one line, exit 2, nothing sent' '
    n=$(nreq)
    for c in "image=i" "queue=q,image=i,vcpus=x" "queue=q,image=i,partition=p"; do
        st=0; "$ELRUN" submit -s aws_batch --cfg "$c" train.py 2>e || st=$?
        test $st = 2; test "$(wc -l <e)" = 1
    done
    st=0; "$ELRUN" submit -s aws_batch --max-retries 10 --cfg "$CFG" train.py 2>e || st=$?
    test $st = 2; grep -q "at most 10 attempts" e
    test "$(nreq)" = "$n"
'

test_expect_success 'inside a Batch node: two agents rendezvous on the main node with no rendezvous flags' '
    port=$(free_port)
    cat >w.sh <<EOF
#!/bin/sh
echo "rank=\$RANK world=\$WORLD_SIZE group=\$GROUP_RANK" >"$T/w.\$RANK"
EOF
    chmod +x w.sh
    env -u ELRUN_AWS_ENDPOINT_URL AWS_BATCH_JOB_ID="j1#0" AWS_BATCH_JOB_NODE_INDEX=0 \
        AWS_BATCH_JOB_MAIN_NODE_INDEX=0 AWS_BATCH_JOB_NUM_NODES=2 ELRUN_AWS_BATCH_PORT=$port \
        ELRUN_LOG_LEVEL=info "$ELRUN" --nnodes=2 --nproc-per-node=1 --no-python ./w.sh 2>main.err &
    m=$!
    env AWS_BATCH_JOB_ID="j1#1" AWS_BATCH_JOB_NODE_INDEX=1 AWS_BATCH_JOB_MAIN_NODE_INDEX=0 \
        AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS=127.0.0.1 AWS_BATCH_JOB_NUM_NODES=2 \
        ELRUN_AWS_BATCH_PORT=$port ELRUN_LOG_LEVEL=info "$ELRUN" --nnodes=2 --nproc-per-node=1 --no-python ./w.sh 2>other.err
    wait $m
    cat main.err other.err
    grep -q "inside AWS Batch job j1#0: PET_NODE_RANK=0 from AWS_BATCH_JOB_NODE_INDEX, PET_RDZV_ID=j1 from AWS_BATCH_JOB_ID" main.err
    grep -q "PET_RDZV_ENDPOINT=0.0.0.0:$port" main.err
    grep -q "PET_RDZV_ENDPOINT=127.0.0.1:$port from AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS" other.err
    # the main node hosts the store, the other does not
    grep -q "hosting the rendezvous store on 0.0.0.0:$port" main.err
    refute grep -q "hosting the rendezvous store" other.err
    grep -q "world=2" w.0
    grep -q "world=2" w.1
'

# Every variant of the template: 1 or 3 etcd, spot or not, a new network
# and EFS, an existing VPC, an existing VPC and EFS.
tpl_variants() {
    local e s v f
    for e in 1 3; do for s in off on; do for v in new vpc vpc+efs; do
        f="$T/tpl-etcd$e-spot$s-$v.json"
        local a=(--name "v$e$s${v//+/-}" -j 2:4x2 --desired 3 --etcd $e --elrun-url https://example.com/elrun -o "$f")
        [[ $s == on ]] && a+=(--spot-price 0.5)
        [[ $v == vpc* ]] && a+=(--vpc vpc-0123456789abcdef0 --subnets subnet-0123456789abcdef0,subnet-0123456789abcdef1)
        [[ $v == vpc+efs ]] && a+=(--efs fs-0123456789abcdef0)
        "$ELRUN" aws template "${a[@]}" --max-restarts 3 train.py --epochs 3 || return 1
        echo "$f"
    done; done; done
}
# break_tpl IN OUT PYTHON: OUT is IN with the resources r changed by PYTHON.
break_tpl() {
    python3 -c "
import json, sys
t = json.load(open(sys.argv[1])); r = t[\"Resources\"]
$3
json.dump(t, open(sys.argv[2], \"w\"))" "$1" "$2"
}
NODE=$(command -v node || true)
CFN_VALIDATE="$ROOT/tests/aws/cfn-validate.js"
if [[ -n $NODE ]]; then
test_expect_success 'elrun aws template: every variant passes the CloudFormation validator (npm: cfn-lint on AWS'"'"'s resource specification), which catches broken ones' '
    [[ -d $ROOT/tests/aws/node_modules/cfn-lint ]] || { echo "tests/aws/node_modules is missing: run scripts/deps.sh (npm ci in tests/aws)"; false; }
    tpl_variants >variants
    test "$(wc -l <variants)" = 12
    "$NODE" "$CFN_VALIDATE" $(cat variants) >val.out
    cat val.out
    test "$(grep -c ": valid$" val.out)" = 12
    # the user data of each is bash that parses, no CloudFormation variable left
    for f in $(cat variants); do
        python3 -c "
import json, sys
t = json.load(open(sys.argv[1]))[\"Resources\"]
for n in (\"WorkerLaunchTemplate\", \"EtcdLaunchTemplate\"):
    sub = t[n][\"Properties\"][\"LaunchTemplateData\"][\"UserData\"][\"Fn::Base64\"][\"Fn::Sub\"]
    text = sub[0] if isinstance(sub, list) else sub
    open(n + \".sh\", \"w\").write(text.replace(\"\${AWS::Region}\", \"us-east-1\").replace(\"\${FileSystemId}\", \"fs-1\"))" "$f"
        bash -n WorkerLaunchTemplate.sh
        bash -n EtcdLaunchTemplate.sh
        refute grep -q "[$][{]" WorkerLaunchTemplate.sh
    done
    # broken on purpose: each is refused, with the reason
    t=$(head -1 variants)
    break_tpl "$t" b1.json "del r[\"WorkerGroup\"][\"Properties\"][\"MaxSize\"]"
    break_tpl "$t" b2.json "r[\"WorkerGroup\"][\"Properties\"][\"LaunchTemplate\"][\"LaunchTemplateId\"] = {\"Ref\": \"NoSuchThing\"}"
    break_tpl "$t" b3.json "r[\"WorkerGroup\"][\"Properties\"][\"LaunchTemplate\"][\"Version\"] = {\"Fn::GetAtt\": [\"WorkerLaunchTemplate\", \"LatestVersion\"]}"
    break_tpl "$t" b4.json "r[\"WorkerLaunchTemplate\"][\"Properties\"][\"LaunchTemplateData\"][\"MetadataOptions\"][\"HttpToken\"] = \"required\""
    break_tpl "$t" b5.json "r[\"LogGroup\"][\"Type\"] = \"AWS::Logs::LogGroups\""
    for i in 1 2 3 4 5; do refute "$NODE" "$CFN_VALIDATE" b$i.json >b$i.out; cat b$i.out; done
    grep -q "b1.json: crit: .*Required property MaxSize missing for type AWS::AutoScaling::AutoScalingGroup" b1.out
    grep -q "b2.json: crit: .*Referenced value NoSuchThing does not exist" b2.out
    grep -q "b3.json: crit: .*No such attribute LatestVersion on AWS::EC2::LaunchTemplate" b3.out
    grep -q "b4.json: crit: .*HttpToken is not a valid property of AWS::EC2::LaunchTemplate.MetadataOptions" b4.out
    grep -q "b5.json: crit: .*No such resource AWS::Logs::LogGroups" b5.out
    # the good ones in the same run stay good
    refute "$NODE" "$CFN_VALIDATE" "$t" b1.json >mix.out
    grep -q "$t: valid" mix.out
'
else
    test_skip 'elrun aws template passes the CloudFormation validator' 'no node (Debian: nodejs; then scripts/deps.sh)'
fi

# An extra, where the machine has it: the Python cfn-lint (PyPI, not Debian).
if [[ -n $CFN_LINT ]]; then
test_expect_success 'elrun aws template: the Python cfn-lint passes every variant too' '
    tpl_variants >variants
    for f in $(cat variants); do "$CFN_LINT" "$f"; done
    break_tpl "$(head -1 variants)" broken.json "del r[\"WorkerGroup\"][\"Properties\"][\"MaxSize\"]"
    refute "$CFN_LINT" broken.json >lint.out
    grep -q "MaxSize" lint.out
'
else
    test_skip 'elrun aws template passes the Python cfn-lint (an extra)' 'no cfn-lint on this machine (PyPI, not a Debian package)'
fi

test_expect_success 'elrun aws up/scale/status/down through the aws CLI (the recorder stands in for CloudFormation and Auto Scaling)' '
    "$ELRUN" aws template --name demo -j 2:4x1 --elrun-url https://example.com/elrun -o up.json train.py
    "$ELRUN" aws up --name demo --template up.json >up.out
    grep -qx "arn:aws:cloudformation:us-east-1:123456789012:stack/demo/1" up.out
    grep "\"CreateStack\"" "$T/fake/requests.jsonl" | jq_ "d[\"body\"][\"Capabilities.member.1\"]" | contains -x CAPABILITY_IAM
    grep "\"CreateStack\"" "$T/fake/requests.jsonl" | jq_ "json.loads(d[\"body\"][\"TemplateBody\"])[\"Resources\"][\"WorkerGroup\"][\"Type\"]" |
        contains -x AWS::AutoScaling::AutoScalingGroup
    "$ELRUN" aws scale --name demo --desired 3 >sc.out
    grep -qx "demo-WorkerGroup-X1: desired 3 workers" sc.out
    grep "\"SetDesiredCapacity\"" "$T/fake/requests.jsonl" | jq_ "d[\"body\"][\"DesiredCapacity\"]" | contains -x 3
    "$ELRUN" aws status --name demo >sa.out
    cat sa.out
    grep -qx "stack demo: CREATE_COMPLETE" sa.out
    grep -qx "workers demo-WorkerGroup-X1: min 2 max 4 desired 3" sa.out
    test "$(grep -c "InService" sa.out)" = 3
    "$ELRUN" aws down --name demo
    "$ELRUN" aws status --name demo 2>/dev/null | contains -x "stack demo: DELETE_IN_PROGRESS"
    echo no >"$T/fake/fail"
    one_line_fail "$ELRUN" aws scale --name demo --desired 2
    grep -q "aws cloudformation describe-stack-resource failed" "$T/f.err"
    rm -f "$T/fake/fail"
'

test_expect_success 'elrun aws: usage errors are one line, exit 2' '
    st=0; "$ELRUN" aws template --etcd 2 --elrun-url https://x/e train.py 2>e || st=$?
    test $st = 2; grep -q "1 or 3 etcd instances" e; test "$(wc -l <e)" = 1
    st=0; "$ELRUN" aws template -j 2:4x1 --desired 9 --elrun-url https://x/e train.py 2>e || st=$?
    test $st = 2; grep -q "between the job" e
    st=0; "$ELRUN" aws scale --name demo 2>e || st=$?
    test $st = 2; grep -q "scale needs --desired N" e
    st=0; "$ELRUN" aws frobnicate --name x 2>e || st=$?
    test $st = 2
'

kill -TERM "$FAKE"; wait "$FAKE" 2>/dev/null
test_done
