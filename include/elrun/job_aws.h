/* job_aws.h -- AWS for the job layer: the AWS Batch multi-node job
 * definition and submit-job input `elrun submit -s aws_batch` hands to the
 * aws CLI, the launcher's defaults inside a Batch node, Batch's job states,
 * and the CloudFormation template of `elrun aws template` (docs/AWS.md).
 * Pure functions: nothing here runs a process, touches the network, prints
 * or exits.  Errors: EL_EUSAGE with a one-line message in err; -ENOMEM.
 */
#ifndef ELRUN_JOB_AWS_H
#define ELRUN_JOB_AWS_H

#include <jansson.h>
#include <stddef.h>

#include "elrun/job.h"

/* The --cfg keys of -s aws_batch ("-" and "_" alike). */
extern const char *const el_job_aws_cfg_keys[];

/* Check --cfg for aws_batch: known keys, queue and image given, numbers
 * where numbers belong, tags as KEY:VALUE;KEY:VALUE.  0 or EL_EUSAGE. */
int el_job_aws_check_cfg(const char *cfg, char *err, size_t errlen);

/* The register-job-definition input (*def) and the submit-job input (*sub)
 * for spec, both new references owned by the caller.  The job definition is
 * named after spec->name; id (el_job_make_id) goes into the tags
 * elrun:id, elrun:name, elrun:user and the user's tags.  The container runs
 * `elrun` (or --cfg elrun=PATH) with --nnodes MIN:MAX, --nproc-per-node, the
 * launcher's flags, the script and its arguments; the rendezvous flags come
 * from the node itself (el_job_aws_batch_defaults) unless it is on etcd.
 * Retries: attempts = max_retries + 1, at most 10 (Batch's limit). */
int el_job_aws_batch_inputs(const struct el_job_spec *spec, const char *id,
                            const char *user, json_t **def, json_t **sub,
                            char *err, size_t errlen);

/* Batch's job status word (SUBMITTED, RUNNABLE, ...) as enum el_job_state,
 * or EL_JOB_UNKNOWN. */
int el_job_state_from_aws(const char *status);

/* Inside an AWS Batch node (AWS_BATCH_JOB_ID and AWS_BATCH_JOB_NODE_INDEX
 * set), the PET_* values the launcher takes from it where the user gave
 * neither the flag (has_endpoint: --rdzv-endpoint was on the command line)
 * nor the variable: PET_NODE_RANK from AWS_BATCH_JOB_NODE_INDEX, PET_RDZV_ID
 * from the job id (without "#N"), and unless has_endpoint the c10d
 * rendezvous: the main node (its index is AWS_BATCH_JOB_MAIN_NODE_INDEX,
 * and AWS does not give it AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS)
 * hosts the store on 0.0.0.0:PORT (is_host=1), the others join MAIN:PORT
 * (is_host=0); PORT is $ELRUN_AWS_BATCH_PORT or 29500.  Returns 1 with out filled, 0 if not in a
 * Batch node, EL_EUSAGE for malformed AWS_BATCH_* values. */
int el_job_aws_batch_defaults(char **env, int has_endpoint,
                              struct el_job_env_defaults *out, char *err,
                              size_t errlen);

/* `elrun aws template` options. */
struct el_aws_template {
    const char *name;               /* stack/job name, [A-Za-z0-9-]          */
    struct el_job_size size;        /* workers: MIN:MAX nodes x NPROC        */
    int desired;                    /* desired workers, MIN..MAX             */
    int etcd_nodes;                 /* 1 or 3                                */
    const char *instance_type;      /* workers' type, "c5.xlarge" default    */
    const char *etcd_instance_type; /* "t3.small" default                  */
    const char *spot_price;         /* max spot price (USD/h) or NULL        */
    const char *vpc_id;             /* existing VPC (with subnets) or NULL   */
    const char *subnets;            /* "subnet-a,subnet-b" with vpc_id       */
    const char *efs_id;             /* existing EFS or NULL: one is made     */
    const char *elrun_url;          /* where user data fetches elrun from    */
    const char *key_name;           /* EC2 key pair or NULL                  */
    char **launcher;                /* launcher flags, script, args          */
    int n_launcher;
};

/* The CloudFormation template (JSON) for t; a new reference. */
int el_aws_template(const struct el_aws_template *t, json_t **out, char *err,
                    size_t errlen);

/* The user data scripts of the template, malloc'd bash text (the etcd node
 * and the worker); shared with the tests that run them on netns hosts.
 * Placeholders ${Name} are CloudFormation Fn::Sub variables. */
char *el_aws_user_data_worker(const struct el_aws_template *t);
char *el_aws_user_data_etcd(const struct el_aws_template *t);

#endif
