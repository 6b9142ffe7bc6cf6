--[[
job_submit/lua for colo under Slurm 22.05: every GPU job books its GPUs in Slurm's own per-GPU
GRES, so that slurmctld picks a GPU that has room and the node's colod runs the job on that GPU.
GPU memory is booked as `shard`s, each SHARD_MIB of one GPU's memory, listed per GPU in gres.conf
(`Name=shard Count=<shards> File=/dev/nvidiaN`): a job's shards all come from one GPU, so a GPU
is never booked past its memory. Install it as job_submit.lua next to slurm.conf with
JobSubmitPlugins=lua and GresTypes=gpu,shard,mps (docs/slurm-sites.md).

  * A colo job (colo's SPANK plugin set COLO_MEM, COLO_GPUS or COLO_SHARE in the job-control
    environment) on one GPU per node: shard:ceil(COLO_MEM / SHARD_MIB). Without COLO_MEM, with
    COLO_SHARE=exclusive or with COLO_GPUS above 1: gpu:COLO_GPUS, whole GPUs (Slurm 22.05 takes
    a job's shards from one GPU, so a job on several GPUs of a node cannot share them). Any gpu,
    shard or mps the job asked for besides is replaced.
  * --gres=gpu:N: whole GPUs, as asked.
  * --gres=shard:N: N shards of one GPU, as asked (each SHARD_MIB of its memory).
  * --gres=mps:P (P percent of a GPU): Slurm 22.05 links one sharing GRES to a node's GPUs, so
    the job is booked as P percent of MPS_FULL_SHARDS shards, and its percentage goes into its
    Comment (colo:mps=P), from which colod gives it MPS with P percent of the GPU's threads and a
    memory limit of its booking. (The job's user may change the Comment: the percentage is a
    setting of the user's own job, and the memory is what Slurm booked.)
  * Any other job is left exactly as it is.
  * Refused, with a message to the user: a COLO_MEM or COLO_GPUS that is not a positive decimal
    integer, more GPUs than a node has, more memory than any one GPU takes (less colod's margin),
    gpu, shard or mps together in one request, and (REFUSE_JOB_WIDE_GPUS) GPUs asked for per job,
    task or socket, whose share of each node Slurm decides only at allocation.

Users may not change a job's GPU request afterwards in ways that bypass this (slurm_job_modify);
root (colod, an administrator) may.
]]

-- Settings of this site ---------------------------------------------------------------------

-- The GPU memory one shard stands for, in MiB: colod's slurm.shard_size (default 1 GiB).
SHARD_MIB = 1024
-- The shards of the largest GPU: its gres.conf Count, floor((GPU memory - colod's margin) /
-- SHARD_MIB). colod prints the lines for its node: colod --slurm-gres.
MAX_GPU_SHARDS = 78
-- The most GPUs any node has.
MAX_GPUS_PER_NODE = 2
-- The shards --gres=mps:100 books (mps:P books P percent of it). The shards of the site's
-- smallest GPU keep every mps request placeable on every GPU.
MPS_FULL_SHARDS = 78
-- Refuse GPUs asked for per job, task or socket (their count per node is unknown here).
REFUSE_JOB_WIDE_GPUS = true

-- ------------------------------------------------------------------------------------------

local MIB = 1048576
local GPU, SHARD, MPS = "gpu", "shard", "mps"
local MPS_NOTE = "colo:mps="

-- The value of NAME in the job-control environment of a job request or record (spank_job_env:
-- "NAME=value" strings, indexed from 0 in 22.05, so it is walked with pairs, not ipairs), or nil.
local function spank_env(job, name)
  local env = job.spank_job_env
  if type(env) ~= "table" then
    return nil
  end
  local prefix = name .. "="
  for _, entry in pairs(env) do
    if type(entry) == "string" and entry:sub(1, #prefix) == prefix then
      return entry:sub(#prefix + 1)
    end
  end
  return nil
end

-- Whether colo's plugin marked the job (a request or a record) as a colo job.
local function is_colo_job(job)
  for _, name in ipairs({ "COLO_MEM", "COLO_GPUS", "COLO_SHARE" }) do
    if spank_env(job, name) ~= nil then
      return true
    end
  end
  return false
end

-- A positive decimal integer, or nil. One of more than 15 digits (beyond what Lua's numbers hold
-- exactly) is math.huge: more than any GPU has.
local function positive_integer(text)
  if text == nil or not text:match("^%d+$") then
    return nil
  end
  local digits = text:gsub("^0+", "")
  if #digits > 15 then
    return math.huge
  end
  local n = tonumber(text)
  if n == nil or n <= 0 then
    return nil
  end
  return n
end

-- The entries of a TRES-per-X string ("gres:gpu:2,gres:shard:5"): each {text=, name=, count=}.
-- name is the GRES name (without "gres:" or "gres/"); count is nil when it cannot be read.
local function parse_tres(tres)
  local entries = {}
  if tres == nil or tres == "" then
    return entries
  end
  for text in string.gmatch(tres, "[^,]+") do
    local body = text:gsub("^gres[:/]", "")
    local fields = {}
    for f in string.gmatch(body, "[^:]+") do
      fields[#fields + 1] = f
    end
    local entry = { text = text, name = fields[1] or "" }
    if #fields >= 2 then
      local number, suffix = fields[#fields]:match("^(%d+)([kKmMgGtT]?)$")
      if number then
        local scale = { [""] = 1, k = 1024, m = 1024 ^ 2, g = 1024 ^ 3, t = 1024 ^ 4 }
        entry.count = tonumber(number) * scale[suffix:lower()]
      end
    else
      entry.count = 1
    end
    entries[#entries + 1] = entry
  end
  return entries
end

-- The count of GRES `name` an entry list asks for (0 without any); nil when one is unreadable.
local function count_of(entries, name)
  local n = 0
  for _, e in ipairs(entries) do
    if e.name == name then
      if e.count == nil then
        return nil
      end
      n = n + e.count
    end
  end
  return n
end

-- The entries again as a string, without any gpu, shard or mps, plus `gres` (e.g.
-- "gres:shard:12") when given.
local function with_gpu_request(entries, gres)
  local out = {}
  for _, e in ipairs(entries) do
    if e.name ~= GPU and e.name ~= SHARD and e.name ~= MPS then
      out[#out + 1] = e.text
    end
  end
  if gres then
    out[#out + 1] = gres
  end
  return table.concat(out, ",")
end

-- `comment` with colo's mps note made `percent` (nil: removed); the rest kept.
local function with_mps_note(comment, percent)
  local rest = (comment or ""):gsub(MPS_NOTE .. "%d*%s*", "")
  rest = rest:gsub("%s+$", "")
  if percent == nil then
    return rest
  end
  if rest ~= "" then
    rest = rest .. " "
  end
  return rest .. MPS_NOTE .. tostring(percent)
end

local function shards_for_bytes(bytes)
  return math.ceil(bytes / (SHARD_MIB * MIB))
end

local function gib(shards)
  return string.format("%g GiB", shards * SHARD_MIB / 1024)
end

-- The GPU request of another scope (per job, task or socket), or nil.
local function job_wide_gpus(job_desc)
  for _, field in ipairs({ "tres_per_job", "tres_per_task", "tres_per_socket" }) do
    local entries = parse_tres(job_desc[field])
    for _, name in ipairs({ GPU, SHARD, MPS }) do
      if count_of(entries, name) ~= 0 then
        return field
      end
    end
  end
  return nil
end

-- What a job books on each of its nodes: {gres = "gres:shard:12" or "gres:gpu:2" or nil,
-- mps = percent or nil}, or nil and a reason to refuse it.
local function booking(job_desc, entries)
  local wide = job_wide_gpus(job_desc)
  if wide and REFUSE_JOB_WIDE_GPUS then
    return nil, string.format("GPUs asked for in %s cannot be booked per GPU; use "
      .. "--gres=gpu:N, --gres=shard:N or colo's options (--colo-mem)", wide)
  end

  if is_colo_job(job_desc) then
    local gpus = 1
    local gpus_text = spank_env(job_desc, "COLO_GPUS")
    if gpus_text ~= nil then
      gpus = positive_integer(gpus_text)
      if gpus == nil then
        return nil, string.format("COLO_GPUS must be a positive whole number, not '%s'", gpus_text)
      end
    end
    if gpus > MAX_GPUS_PER_NODE then
      return nil, string.format("%s GPUs asked for, but a node has at most %d", gpus_text,
        MAX_GPUS_PER_NODE)
    end
    local mem_text = spank_env(job_desc, "COLO_MEM")
    if mem_text ~= nil then
      local bytes = positive_integer(mem_text)
      if bytes == nil then
        return nil, string.format(
          "COLO_MEM must be a positive whole number of bytes per GPU, not '%s'", mem_text)
      end
      local shards = shards_for_bytes(bytes)
      if shards > MAX_GPU_SHARDS then
        return nil, string.format("%.1f GiB per GPU is more than any GPU here takes: the largest "
          .. "takes %s (its memory less colod's margin)", bytes / 1024 / MIB, gib(MAX_GPU_SHARDS))
      end
      if gpus == 1 and spank_env(job_desc, "COLO_SHARE") ~= "exclusive" then
        return { gres = string.format("gres:%s:%d", SHARD, shards) }
      end
    end
    -- Whole GPUs: an exclusive job, one whose need is not known, or one on several GPUs.
    return { gres = string.format("gres:%s:%d", GPU, gpus) }
  end

  local gpus, shards, mps = count_of(entries, GPU), count_of(entries, SHARD), count_of(entries, MPS)
  if gpus == nil or shards == nil or mps == nil then
    return nil, "a gpu, shard or mps request without a readable count"
  end
  local kinds = (gpus > 0 and 1 or 0) + (shards > 0 and 1 or 0) + (mps > 0 and 1 or 0)
  if kinds > 1 then
    return nil, "ask for one of gpu, shard or mps, not several: each books the same GPUs"
  end
  if gpus > MAX_GPUS_PER_NODE then
    return nil, string.format("%d whole GPUs asked for, but a node has at most %d", gpus,
      MAX_GPUS_PER_NODE)
  end
  if shards > MAX_GPU_SHARDS then
    return nil, string.format("shard:%d is more than any GPU has (at most %d, of %s each)",
      shards, MAX_GPU_SHARDS, gib(1))
  end
  if mps > 100 then
    return nil, string.format("mps:%d is more than a whole GPU (mps:100)", mps)
  end
  if mps > 0 then
    return { gres = string.format("gres:%s:%d", SHARD, math.ceil(mps * MPS_FULL_SHARDS / 100)),
             mps = mps }
  end
  return {} -- as it is: whole GPUs, shards, or no GPU at all
end

-- Refuses: the message reaches the user (sbatch/srun print it).
local function refuse(message)
  slurm.log_user("colo: %s", message)
  return slurm.ERROR
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  local before = job_desc.tres_per_node
  local entries = parse_tres(before)
  local booked, problem = booking(job_desc, entries)
  if problem then
    return refuse(problem)
  end
  if booked.gres then
    local after = with_gpu_request(entries, booked.gres)
    if after ~= before then
      job_desc.tres_per_node = after
      slurm.log_info("colo: job of uid %d: tres_per_node %s -> %s", submit_uid,
        tostring(before), after)
    end
  end
  if booked.mps then
    job_desc.comment = with_mps_note(job_desc.comment, booked.mps)
    slurm.log_user("colo: mps:%d is booked as %s (%d%% of a GPU's threads, under MPS)", booked.mps,
      booked.gres:match("[^:]+:[^:]+$"), booked.mps)
  end
  return slurm.SUCCESS
end

-- Root (colod, an administrator) may change anything. A user changing the GPU request of a
-- pending job: a colo job's may not change (its booking is colo's); any other is booked again as
-- at submission. (Slurm 22.05 drops messages to the user from job_modify: the user sees
-- "Unspecified error".)
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  if modify_uid == 0 or job_desc.tres_per_node == nil then
    return slurm.SUCCESS
  end
  if is_colo_job(job_rec) then
    slurm.log_info("colo: uid %d may not change the GPU request of colo job %d", modify_uid,
      job_rec.job_id)
    return slurm.ERROR
  end
  local entries = parse_tres(job_desc.tres_per_node)
  local booked, problem = booking(job_desc, entries)
  if problem then
    slurm.log_info("colo: uid %d asked job %d for %s: %s", modify_uid, job_rec.job_id,
      job_desc.tres_per_node, problem)
    return slurm.ERROR
  end
  if booked.gres then
    job_desc.tres_per_node = with_gpu_request(entries, booked.gres)
  end
  -- The mps note follows the request (a job that no longer asks for mps loses it).
  local comment = job_desc.comment or job_rec.comment
  local note = with_mps_note(comment, booked.mps)
  if note ~= (comment or "") then
    job_desc.comment = note
  end
  return slurm.SUCCESS
end

slurm.log_info("colo: job_submit.lua loaded (SHARD_MIB=%d, MAX_GPU_SHARDS=%d, "
  .. "MAX_GPUS_PER_NODE=%d, MPS_FULL_SHARDS=%d)", SHARD_MIB, MAX_GPU_SHARDS, MAX_GPUS_PER_NODE,
  MPS_FULL_SHARDS)
return slurm.SUCCESS
