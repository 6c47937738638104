/* aws_cfn.c -- the CloudFormation template of `elrun aws template`: an EC2
 * fleet for one elastic job, after the original TorchElastic AWS tooling
 * (docs/AWS.md): a VPC with two public subnets in two zones (or the user's),
 * a security group whose members reach each other and an EFS group that
 * lets them mount NFS, an EFS file system with a mount target per subnet
 * (or the user's), a log group, one role per kind of instance (SSM, the log
 * group, ec2:DescribeInstances to find etcd), an etcd Auto Scaling group of
 * 1 or 3 and a worker group of MIN..MAX (desired N, spot with a maximum
 * price when asked).  The user data (Debian 12 images) mounts EFS, installs
 * etcd or elrun, and starts the agent with --rdzv-backend=etcd and, on
 * spot, its preemption notice hook (--preempt-notice-cmd) pointed at EC2's
 * two-minute interruption notice in the instance metadata (IMDSv2).
 * Pure; see job_aws.h.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sbuf.h"
#include "elrun/err.h"
#include "elrun/job.h"
#include "elrun/job_aws.h"

#define put el__sbuf_printf /* the generator's one verb */

static char *done(struct el__sbuf *b)
{
    if (b->oom) {
        free(b->p);
        return NULL;
    }
    return b->p;
}

/* The IMDSv2 token and the etcd members' private addresses: bash shared by
 * both user data scripts.  ${EtcdGroup} and ${AWS::Region} are Fn::Sub's. */
static void find_etcd(struct el__sbuf *b, const char *fleet, int n)
{
    put(b,
        "# The etcd members: the fleet's running etcd instances (by the "
        "tags the Auto Scaling group gives them).\n"
        "while :; do\n"
        "  ips=$(aws ec2 describe-instances --region \"${AWS::Region}\" "
        "--filters Name=tag:elrun:fleet,Values=%s Name=tag:elrun:role,Values=etcd"
        " Name=instance-state-name,Values=running --query "
        "'Reservations[].Instances[].PrivateIpAddress' --output text | "
        "tr '\\t' '\\n' | sort) || ips=\n"
        "  [ \"$(echo \"$ips\" | grep -c .)\" -ge %d ] && break\n"
        "  sleep 5\n"
        "done\n",
        fleet, n);
}

char *el_aws_user_data_etcd(const struct el_aws_template *t)
{
    struct el__sbuf b = {0};
    put(&b,
        "#!/bin/bash\n# etcd member of elrun fleet %s (elrun aws template;"
        " docs/AWS.md)\nset -euo pipefail\nexport DEBIAN_FRONTEND="
        "noninteractive\n"
        "apt-get update -qq\napt-get install -y -qq etcd-server awscli curl"
        " >/dev/null\nsystemctl stop etcd || true\n"
        "TOKEN=$(curl -fsS -X PUT http://169.254.169.254/latest/api/token "
        "-H 'X-aws-ec2-metadata-token-ttl-seconds: 300')\n"
        "me=$(curl -fsS -H \"X-aws-ec2-metadata-token: $TOKEN\" "
        "http://169.254.169.254/latest/meta-data/local-ipv4)\n",
        t->name);
    find_etcd(&b, t->name, t->etcd_nodes);
    put(&b,
        "cluster=$(for ip in $ips; do printf 'e%%s=http://%%s:2380,' "
        "\"$(echo $ip | tr . -)\" \"$ip\"; done | sed 's/,$//')\n"
        "cat >/etc/default/etcd <<EOF\n"
        "ETCD_NAME=e$(echo $me | tr . -)\nETCD_DATA_DIR=/var/lib/etcd/elrun\n"
        "ETCD_LISTEN_CLIENT_URLS=http://0.0.0.0:2379\n"
        "ETCD_ADVERTISE_CLIENT_URLS=http://$me:2379\n"
        "ETCD_LISTEN_PEER_URLS=http://0.0.0.0:2380\n"
        "ETCD_INITIAL_ADVERTISE_PEER_URLS=http://$me:2380\n"
        "ETCD_INITIAL_CLUSTER=$cluster\nETCD_INITIAL_CLUSTER_STATE=new\n"
        "ETCD_INITIAL_CLUSTER_TOKEN=elrun-%s\nEOF\n"
        "systemctl enable --now etcd\n",
        t->name);
    return done(&b);
}

char *el_aws_user_data_worker(const struct el_aws_template *t)
{
    struct el__sbuf b = {0};
    put(&b,
        "#!/bin/bash\n# elrun worker of fleet %s (elrun aws template; "
        "docs/AWS.md)\nset -euo pipefail\nexport DEBIAN_FRONTEND="
        "noninteractive\n"
        "apt-get update -qq\napt-get install -y -qq nfs-common awscli curl "
        "python3 libuv1 libjansson4 libnettle8 libcurl4 >/dev/null\n",
        t->name);
    put(&b,
        "# EFS, for data and checkpoints, as the original tooling "
        "mounts it.\nmkdir -p /mnt/efs\n"
        "echo \"${FileSystemId}.efs.${AWS::Region}.amazonaws.com:/ /mnt/efs "
        "nfs4 nfsvers=4.1,rsize=1048576,wsize=1048576,hard,timeo=600,"
        "retrans=2,noresvport,_netdev 0 0\" >>/etc/fstab\n"
        "until mount /mnt/efs; do sleep 5; done\nchmod 1777 /mnt/efs\n");
    put(&b,
        "curl -fsSL '%s' -o /usr/local/bin/elrun\n"
        "chmod 755 /usr/local/bin/elrun\n",
        t->elrun_url);
    find_etcd(&b, t->name, t->etcd_nodes);
    put(&b, "endpoint=$(for ip in $ips; do printf '%%s:2379,' \"$ip\"; done |"
            " sed 's/,$//')\n");
    int spot = t->spot_price != NULL;
    if (spot)
        put(&b,
            "# EC2's spot interruption notice (two minutes ahead): the agent "
            "runs this every second (--preempt-notice-cmd); exit 0 is a "
            "notice.  IMDSv2: a session token first, then "
            "spot/instance-action, which is 404 until EC2 schedules the "
            "interruption.\n"
            "cat >/usr/local/bin/elrun-spot-notice <<'EOF'\n#!/bin/sh\n"
            "t=$(curl -fs -m 2 -X PUT -H 'X-aws-ec2-metadata-token-ttl-"
            "seconds: 60' http://169.254.169.254/latest/api/token) || exit 1\n"
            "exec curl -fs -m 2 -o /dev/null -H \"X-aws-ec2-metadata-token: "
            "$t\" http://169.254.169.254/latest/meta-data/spot/"
            "instance-action\nEOF\n"
            "chmod 755 /usr/local/bin/elrun-spot-notice\n");
    put(&b,
        "cat >/etc/systemd/system/elrun-worker.service <<EOF\n"
        "[Unit]\nDescription=elrun agent of fleet %s\n"
        "After=network-online.target remote-fs.target\n[Service]\n"
        "WorkingDirectory=/mnt/efs\n"
        "Environment=PYTHONUNBUFFERED=1 ELRUN_LOG_LEVEL=info "
        "ELRUN_CKPT_DIR=/mnt/efs/%s/ckpt\n"
        "ExecStartPre=/bin/mkdir -p /mnt/efs/%s/ckpt\n"
        "ExecStart=/usr/local/bin/elrun --nnodes=%d:%d --nproc-per-node=%d "
        "--rdzv-backend=etcd --rdzv-endpoint=$endpoint --rdzv-id=%s%s",
        t->name, t->name, t->name, t->size.min_nodes, t->size.max_nodes,
        t->size.nproc, t->name,
        spot ? " --preempt-notice-secs 110 --preempt-notice-cmd "
               "/usr/local/bin/elrun-spot-notice"
             : "");
    for (int i = 0; i < t->n_launcher; i++) {
        char *q = el_job_shell_quote(t->launcher[i]);
        if (!q) {
            b.oom = 1;
            break;
        }
        put(&b, " %s", q);
        free(q);
    }
    /* On the notice the agent has its workers checkpoint at once and leaves
     * the job 110 s later (exit 75); EC2's shutdown before that is
     * systemd's SIGTERM, the same preemption.  TimeoutStopSec leaves the
     * agent its stop grace and the workers' checkpoint on SIGTERM. */
    put(&b, "\nKillSignal=SIGTERM\nKillMode=mixed\nTimeoutStopSec=110\n"
            "Restart=no\nStandardOutput=append:/var/log/elrun-worker.log\n"
            "StandardError=inherit\nEOF\n"
            "systemctl daemon-reload\n"
            "systemctl start elrun-worker\n");
    return done(&b);
}

static json_t *tag(const char *k, const char *v, int propagate)
{
    return propagate < 0 ? json_pack("{s:s, s:s}", "Key", k, "Value", v)
                         : json_pack("{s:s, s:s, s:b}", "Key", k, "Value", v,
                                     "PropagateAtLaunch", propagate);
}

static json_t *ref(const char *name)
{
    return json_pack("{s:s}", "Ref", name);
}

static json_t *getatt(const char *res, const char *att)
{
    return json_pack("{s:[s, s]}", "Fn::GetAtt", res, att);
}

static json_t *role(const char *log_actions)
{
    json_t *stmts =
        json_pack("[{s:s, s:[s], s:s}]", "Effect", "Allow", "Action",
                  "ec2:DescribeInstances", "Resource", "*");
    if (log_actions)
        json_array_append_new(
            stmts,
            json_pack("{s:s, s:[s, s], s:o}", "Effect", "Allow", "Action",
                      "logs:CreateLogStream", "logs:PutLogEvents", "Resource",
                      json_pack("{s:s}", "Fn::Sub", "${LogGroup.Arn}")));
    return json_pack("{s:s, s:{s:{s:s, s:[{s:s, s:{s:[s]}, s:s}]}, s:[s], "
                     "s:[{s:s, s:{s:s, s:o}}]}}",
                     "Type", "AWS::IAM::Role", "Properties",
                     "AssumeRolePolicyDocument", "Version", "2012-10-17",
                     "Statement", "Effect", "Allow", "Principal", "Service",
                     "ec2.amazonaws.com", "Action", "sts:AssumeRole",
                     "ManagedPolicyArns",
                     "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
                     "Policies", "PolicyName", "elrun-fleet", "PolicyDocument",
                     "Version", "2012-10-17", "Statement", stmts);
}

static json_t *launch_template(const struct el_aws_template *t,
                               const char *profile, const char *type,
                               char *user_data, int spot)
{
    json_t *data = json_pack(
        "{s:o, s:s, s:{s:o}, s:[o], s:{s:{s:s}}, s:{s:s}, s:[{s:s, s:[o]}]}",
        "ImageId", ref("ImageId"), "InstanceType", type, "IamInstanceProfile",
        "Arn", getatt(profile, "Arn"), "SecurityGroupIds",
        ref("InstanceSecurityGroup"), "UserData", "Fn::Base64", "Fn::Sub",
        user_data, "MetadataOptions", "HttpTokens", "required",
        "TagSpecifications", "ResourceType", "instance", "Tags",
        tag("elrun:fleet", t->name, -1));
    if (spot) {
        json_t *so = json_object();
        if (t->spot_price && *t->spot_price)
            json_object_set_new(so, "MaxPrice", json_string(t->spot_price));
        json_object_set_new(so, "SpotInstanceType", json_string("one-time"));
        json_object_set_new(
            data, "InstanceMarketOptions",
            json_pack("{s:s, s:o}", "MarketType", "spot", "SpotOptions", so));
    }
    if (t->key_name && *t->key_name)
        json_object_set_new(data, "KeyName", json_string(t->key_name));
    return json_pack("{s:s, s:{s:o}}", "Type", "AWS::EC2::LaunchTemplate",
                     "Properties", "LaunchTemplateData", data);
}

static json_t *asg(const char *lt, int min, int max, int desired,
                   json_t *subnets, const char *name, const char *kind)
{
    char a[16], b[16], c[16], n[200];
    snprintf(a, sizeof a, "%d", min);
    snprintf(b, sizeof b, "%d", max);
    snprintf(c, sizeof c, "%d", desired);
    snprintf(n, sizeof n, "%s-%s", name, kind);
    return json_pack("{s:s, s:{s:s, s:s, s:s, s:o, s:{s:o, s:o}, s:[o, o]}}",
                     "Type", "AWS::AutoScaling::AutoScalingGroup", "Properties",
                     "MinSize", a, "MaxSize", b, "DesiredCapacity", c,
                     "VPCZoneIdentifier", subnets, "LaunchTemplate",
                     "LaunchTemplateId", ref(lt), "Version",
                     getatt(lt, "LatestVersionNumber"), "Tags",
                     tag("Name", n, 1), tag("elrun:role", kind, 1));
}

static int name_ok(const char *s)
{
    if (!s || !*s || strlen(s) > 64)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9') || *s == '-'))
            return 0;
    return 1;
}

int el_aws_template(const struct el_aws_template *t, json_t **out, char *err,
                    size_t errlen)
{
    *out = NULL;
    if (!name_ok(t->name)) {
        snprintf(err, errlen,
                 "--name '%s': letters, digits and '-', at most "
                 "64 (it names the stack's resources)",
                 t->name ? t->name : "");
        return EL_EUSAGE;
    }
    if (t->etcd_nodes != 1 && t->etcd_nodes != 3) {
        snprintf(err, errlen, "--etcd %d: 1 or 3 etcd instances",
                 t->etcd_nodes);
        return EL_EUSAGE;
    }
    if (t->desired < t->size.min_nodes || t->desired > t->size.max_nodes) {
        snprintf(err, errlen,
                 "--desired %d: between the job's MIN %d and "
                 "MAX %d",
                 t->desired, t->size.min_nodes, t->size.max_nodes);
        return EL_EUSAGE;
    }
    if (!!(t->vpc_id && *t->vpc_id) != !!(t->subnets && *t->subnets)) {
        snprintf(err, errlen,
                 "--vpc and --subnets go together (an existing "
                 "VPC and two or more of its subnets)");
        return EL_EUSAGE;
    }
    if ((t->vpc_id && *t->vpc_id && strncmp(t->vpc_id, "vpc-", 4)) ||
        (t->efs_id && *t->efs_id && strncmp(t->efs_id, "fs-", 3)) ||
        (t->subnets && *t->subnets && strncmp(t->subnets, "subnet-", 7))) {
        snprintf(err, errlen,
                 "--vpc vpc-..., --subnets subnet-...,subnet-..."
                 " and --efs fs-... are AWS ids");
        return EL_EUSAGE;
    }
    if (!t->elrun_url || strncmp(t->elrun_url, "https://", 8)) {
        snprintf(err, errlen,
                 "--elrun-url: the https:// address the "
                 "instances download the elrun binary from");
        return EL_EUSAGE;
    }
    if (t->n_launcher < 1) {
        snprintf(err, errlen,
                 "no training script: elrun aws template "
                 "[options] [launcher flags] SCRIPT [ARGS...] (paths are "
                 "relative to EFS's root)");
        return EL_EUSAGE;
    }
    char *ud_w = el_aws_user_data_worker(t), *ud_e = el_aws_user_data_etcd(t);
    json_t *r = json_object();
    json_t *subnets;
    json_t *vpc;
    if (t->vpc_id && *t->vpc_id) {
        vpc = json_string(t->vpc_id);
        subnets = json_array();
        char sn[1024];
        snprintf(sn, sizeof sn, "%s", t->subnets);
        for (char *p = strtok(sn, ","); p; p = strtok(NULL, ","))
            json_array_append_new(subnets, json_string(p));
    } else {
        vpc = ref("VPC");
        subnets = json_pack("[o, o]", ref("SubnetA"), ref("SubnetB"));
        json_object_set_new(
            r, "VPC",
            json_pack(
                "{s:s, s:{s:s, s:b, s:b, s:[o]}}", "Type", "AWS::EC2::VPC",
                "Properties", "CidrBlock", "10.77.0.0/16", "EnableDnsSupport",
                1, "EnableDnsHostnames", 1, "Tags", tag("Name", t->name, -1)));
        json_object_set_new(
            r, "InternetGateway",
            json_pack("{s:s}", "Type", "AWS::EC2::InternetGateway"));
        json_object_set_new(
            r, "GatewayAttachment",
            json_pack("{s:s, s:{s:o, s:o}}", "Type",
                      "AWS::EC2::VPCGatewayAttachment", "Properties", "VpcId",
                      ref("VPC"), "InternetGatewayId", ref("InternetGateway")));
        json_object_set_new(r, "RouteTable",
                            json_pack("{s:s, s:{s:o}}", "Type",
                                      "AWS::EC2::RouteTable", "Properties",
                                      "VpcId", ref("VPC")));
        json_object_set_new(r, "DefaultRoute",
                            json_pack("{s:s, s:s, s:{s:o, s:s, s:o}}", "Type",
                                      "AWS::EC2::Route", "DependsOn",
                                      "GatewayAttachment", "Properties",
                                      "RouteTableId", ref("RouteTable"),
                                      "DestinationCidrBlock", "0.0.0.0/0",
                                      "GatewayId", ref("InternetGateway")));
        static const char *const sn[] = {"SubnetA", "SubnetB"};
        static const char *const cidr[] = {"10.77.0.0/20", "10.77.16.0/20"};
        static const char *const assoc[] = {"SubnetARoutes", "SubnetBRoutes"};
        for (int i = 0; i < 2; i++) {
            json_object_set_new(
                r, sn[i],
                json_pack("{s:s, s:{s:o, s:s, s:b, s:{s:[i, {s:s}]}}}", "Type",
                          "AWS::EC2::Subnet", "Properties", "VpcId", ref("VPC"),
                          "CidrBlock", cidr[i], "MapPublicIpOnLaunch", 1,
                          "AvailabilityZone", "Fn::Select", i, "Fn::GetAZs",
                          ""));
            json_object_set_new(
                r, assoc[i],
                json_pack("{s:s, s:{s:o, s:o}}", "Type",
                          "AWS::EC2::SubnetRouteTableAssociation", "Properties",
                          "SubnetId", ref(sn[i]), "RouteTableId",
                          ref("RouteTable")));
        }
    }
    json_object_set_new(
        r, "InstanceSecurityGroup",
        json_pack(
            "{s:s, s:{s:s, s:O}}", "Type", "AWS::EC2::SecurityGroup",
            "Properties", "GroupDescription",
            "elrun fleet: instances reach each other (store, etcd, workers); "
            "no inbound from outside (use SSM)",
            "VpcId", vpc));
    json_object_set_new(r, "InstanceIngressSelf",
                        json_pack("{s:s, s:{s:o, s:s, s:o}}", "Type",
                                  "AWS::EC2::SecurityGroupIngress",
                                  "Properties", "GroupId",
                                  getatt("InstanceSecurityGroup", "GroupId"),
                                  "IpProtocol", "-1", "SourceSecurityGroupId",
                                  getatt("InstanceSecurityGroup", "GroupId")));
    json_t *fs;
    if (t->efs_id && *t->efs_id) {
        fs = json_string(t->efs_id);
    } else {
        fs = ref("FileSystem");
        json_object_set_new(
            r, "EfsSecurityGroup",
            json_pack("{s:s, s:{s:s, s:O, s:[{s:s, s:i, s:i, s:o}]}}", "Type",
                      "AWS::EC2::SecurityGroup", "Properties",
                      "GroupDescription",
                      "elrun fleet: NFS from the instances to EFS", "VpcId",
                      vpc, "SecurityGroupIngress", "IpProtocol", "tcp",
                      "FromPort", 2049, "ToPort", 2049, "SourceSecurityGroupId",
                      getatt("InstanceSecurityGroup", "GroupId")));
        json_object_set_new(
            r, "FileSystem",
            json_pack("{s:s, s:s, s:s, s:{s:b, s:s, s:[o]}}", "Type",
                      "AWS::EFS::FileSystem", "DeletionPolicy", "Retain",
                      "UpdateReplacePolicy", "Retain", "Properties",
                      "Encrypted", 1, "PerformanceMode", "generalPurpose",
                      "FileSystemTags", tag("Name", t->name, -1)));
        for (size_t i = 0; i < json_array_size(subnets); i++) {
            char n[32];
            snprintf(n, sizeof n, "MountTarget%zu", i);
            json_object_set_new(
                r, n,
                json_pack("{s:s, s:{s:o, s:O, s:[o]}}", "Type",
                          "AWS::EFS::MountTarget", "Properties", "FileSystemId",
                          ref("FileSystem"), "SubnetId",
                          json_array_get(subnets, i), "SecurityGroups",
                          getatt("EfsSecurityGroup", "GroupId")));
        }
    }
    char lg[200];
    snprintf(lg, sizeof lg, "/elrun/%s", t->name);
    json_object_set_new(r, "LogGroup",
                        json_pack("{s:s, s:{s:s, s:i}}", "Type",
                                  "AWS::Logs::LogGroup", "Properties",
                                  "LogGroupName", lg, "RetentionInDays", 14));
    json_object_set_new(r, "WorkerRole", role("logs"));
    json_object_set_new(r, "EtcdRole", role(NULL));
    json_object_set_new(r, "WorkerProfile",
                        json_pack("{s:s, s:{s:[o]}}", "Type",
                                  "AWS::IAM::InstanceProfile", "Properties",
                                  "Roles", ref("WorkerRole")));
    json_object_set_new(r, "EtcdProfile",
                        json_pack("{s:s, s:{s:[o]}}", "Type",
                                  "AWS::IAM::InstanceProfile", "Properties",
                                  "Roles", ref("EtcdRole")));
    json_object_set_new(r, "EtcdLaunchTemplate",
                        launch_template(t, "EtcdProfile",
                                        t->etcd_instance_type
                                            ? t->etcd_instance_type
                                            : "t3.small",
                                        ud_e, 0));
    json_object_set_new(
        r, "WorkerLaunchTemplate",
        launch_template(t, "WorkerProfile",
                        t->instance_type ? t->instance_type : "c5.xlarge", ud_w,
                        t->spot_price != NULL));
    json_object_set_new(r, "EtcdGroup",
                        asg("EtcdLaunchTemplate", t->etcd_nodes, t->etcd_nodes,
                            t->etcd_nodes, json_deep_copy(subnets), t->name,
                            "etcd"));
    json_t *wg =
        asg("WorkerLaunchTemplate", t->size.min_nodes, t->size.max_nodes,
            t->desired, json_deep_copy(subnets), t->name, "worker");
    /* Workers wait for etcd's instances (the user data finds them). */
    json_object_set_new(wg, "DependsOn", json_string("EtcdGroup"));
    if (!(t->efs_id && *t->efs_id))
        json_object_set_new(wg, "DependsOn",
                            json_pack("[s, s]", "EtcdGroup", "MountTarget0"));
    json_object_set_new(r, "WorkerGroup", wg);

    char desc[300];
    snprintf(desc, sizeof desc,
             "elrun fleet %s: etcd x%d, workers %d..%d "
             "(desired %d) x %d procs%s (elrun aws template; docs/AWS.md)",
             t->name, t->etcd_nodes, t->size.min_nodes, t->size.max_nodes,
             t->desired, t->size.nproc, t->spot_price ? ", spot" : "");
    *out = json_pack(
        "{s:s, s:s, s:{s:{s:s, s:s}}, s:o, s:{s:{s:o}, s:{s:o}, s:{s:o}, "
        "s:{s:o}}}",
        "AWSTemplateFormatVersion", "2010-09-09", "Description", desc,
        "Parameters", "ImageId", "Type",
        "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>", "Default",
        "/aws/service/debian/release/bookworm/latest/amd64", "Resources", r,
        "Outputs", "WorkerGroup", "Value", ref("WorkerGroup"), "EtcdGroup",
        "Value", ref("EtcdGroup"), "FileSystem", "Value", fs, "LogGroup",
        "Value", ref("LogGroup"));
    json_decref(subnets);
    json_decref(vpc);
    if (!*out || !ud_w || !ud_e) {
        free(ud_w);
        free(ud_e);
        json_decref(*out);
        *out = NULL;
        return -ENOMEM;
    }
    /* The worker's user data names the file system as ${FileSystemId}:
     * Fn::Sub's list form maps it to the file system in use. */
    json_t *mapped = json_pack("[s, {s:O}]", ud_w, "FileSystemId", fs);
    json_object_set_new(
        json_object_get(
            json_object_get(
                json_object_get(json_object_get(r, "WorkerLaunchTemplate"),
                                "Properties"),
                "LaunchTemplateData"),
            "UserData"),
        "Fn::Base64", json_pack("{s:o}", "Fn::Sub", mapped));
    free(ud_w);
    free(ud_e);
    return 0;
}
