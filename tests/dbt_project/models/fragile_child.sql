select count(*) as n from {{ ref('fragile') }}
